import type { Kysely } from 'kysely';
import { dialectOf } from '../dialect.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Hosted agents (docs/hosting.md). `hosted_agents` holds, beside an ordinary agent's listing,
 * what Agentry needs to run it: its seed (sealed with the server's hosting key), its code, the
 * state its owner wants and the state it is in, and which runner holds it until when (a lease,
 * so that replicas agree on who runs what). `hosting_secrets` holds each agent's secrets,
 * sealed; `hosted_storage` its key-value storage; `hosted_logs` the newest lines of its output;
 * `hosting_runners` the processes that run agents, and when each was last heard of. Every row
 * about an agent goes when its listing does.
 */
export async function up(db: AnyDb): Promise<void> {
  const dialect = dialectOf(db);
  await db.schema
    .createTable('hosted_agents')
    .addColumn('address', 'text', (c) =>
      c.primaryKey().references('agents.address').onDelete('cascade'),
    )
    .addColumn('owner_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('network', 'text', (c) => c.notNull())
    .addColumn('seed_ciphertext', 'text', (c) => c.notNull())
    .addColumn('code', 'text')
    .addColumn('code_digest', 'text')
    .addColumn('code_updated_at', 'bigint')
    .addColumn('revision', 'integer', (c) => c.notNull())
    .addColumn('desired_state', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('state_reason', 'text')
    .addColumn('state_changed_at', 'bigint', (c) => c.notNull())
    .addColumn('runner_id', 'text')
    .addColumn('lease_expires_at', 'bigint')
    .addColumn('restarts', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('hosted_agents_owner')
    .on('hosted_agents')
    .columns(['owner_id', 'created_at'])
    .execute();
  await db.schema
    .createIndex('hosted_agents_runner')
    .on('hosted_agents')
    .columns(['runner_id'])
    .execute();
  await db.schema
    .createIndex('hosted_agents_desired')
    .on('hosted_agents')
    .columns(['desired_state', 'lease_expires_at'])
    .execute();
  await db.schema
    .createTable('hosting_secrets')
    .addColumn('address', 'text', (c) =>
      c.notNull().references('hosted_agents.address').onDelete('cascade'),
    )
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('ciphertext', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('hosting_secrets_pk', ['address', 'name'])
    .execute();
  await db.schema
    .createTable('hosted_storage')
    .addColumn('address', 'text', (c) =>
      c.notNull().references('hosted_agents.address').onDelete('cascade'),
    )
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('value', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('hosted_storage_pk', ['address', 'key'])
    .execute();
  await dialect
    .addIdentityColumn(db.schema.createTable('hosted_logs'), 'id')
    .addColumn('address', 'text', (c) =>
      c.notNull().references('hosted_agents.address').onDelete('cascade'),
    )
    .addColumn('time', 'bigint', (c) => c.notNull())
    .addColumn('level', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('entry', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('hosted_logs_address')
    .on('hosted_logs')
    .columns(['address', 'id'])
    .execute();
  await db.schema
    .createTable('hosting_runners')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('host', 'text', (c) => c.notNull())
    .addColumn('seen_at', 'bigint', (c) => c.notNull())
    .addColumn('capacity', 'integer', (c) => c.notNull())
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('hosting_runners').execute();
  await db.schema.dropTable('hosted_logs').execute();
  await db.schema.dropTable('hosted_storage').execute();
  await db.schema.dropTable('hosting_secrets').execute();
  await db.schema.dropTable('hosted_agents').execute();
}
