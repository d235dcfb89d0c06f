import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/** Agents, their mailboxes, per-user quota overrides and monthly usage counters. */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('agents')
    .addColumn('address', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('handle', 'text', (c) => c.unique())
    .addColumn('redirect_url', 'text')
    .addColumn('agent_type', 'text', (c) => c.notNull())
    .addColumn('profile', 'text', (c) => c.notNull())
    .addColumn('endpoints', 'text', (c) => c.notNull())
    .addColumn('protocols', 'text', (c) => c.notNull())
    .addColumn('metadata', 'text')
    .addColumn('registered_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('agents_user_registered')
    .on('agents')
    .columns(['user_id', 'registered_at', 'address'])
    .execute();

  // A mailbox exists while its agent is registered; its counters are kept in step with the
  // messages it holds, in the same transactions.
  await db.schema
    .createTable('mailboxes')
    .addColumn('address', 'text', (c) =>
      c.primaryKey().references('agents.address').onDelete('cascade'),
    )
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('pending_messages', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('bytes_stored', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('mailboxes_user_id').on('mailboxes').column('user_id').execute();

  // Null means "the configured default".
  await db.schema
    .createTable('user_quotas')
    .addColumn('user_id', 'text', (c) => c.primaryKey().references('users.id').onDelete('cascade'))
    .addColumn('agents', 'bigint')
    .addColumn('messages_per_month', 'bigint')
    .addColumn('bytes_stored', 'bigint')
    .addColumn('bytes_transferred_per_month', 'bigint')
    .execute();

  // One row per user and calendar month (UTC), e.g. period '2026-11'.
  await db.schema
    .createTable('usage_periods')
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('period', 'text', (c) => c.notNull())
    .addColumn('num_messages', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('bytes_transferred', 'bigint', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('usage_periods_pk', ['user_id', 'period'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('usage_periods').execute();
  await db.schema.dropTable('user_quotas').execute();
  await db.schema.dropTable('mailboxes').execute();
  await db.schema.dropTable('agents').execute();
}
