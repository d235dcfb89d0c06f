import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * A2A (docs/a2a.md).
 *
 * - `a2a_access`: the agents whose owner serves them over A2A, and to whom (`private`: callers
 *   with an API key of this Agentry; `public`: anyone). No row: off. Goes with the agent.
 * - `a2a_tasks`: the A2A tasks of those agents, in the shape the A2A SDK's task store reads and
 *   writes (tenant: the agent's address; owner: who called).
 * - `a2a_contexts`: which chat session an A2A conversation (context) of a caller with an agent
 *   is carried in.
 * - `a2a_remote_agents`: external A2A agents registered here by their card's URL, each with an
 *   agent key Agentry holds (sealed) so that uAgents agents reach it at an `agent1…` address.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('a2a_access')
    .addColumn('address', 'text', (c) =>
      c.primaryKey().references('agents.address').onDelete('cascade'),
    )
    .addColumn('access', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('a2a_tasks')
    .addColumn('tenant', 'text', (c) => c.notNull())
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('context_id', 'text', (c) => c.notNull())
    .addColumn('status_last_updated', 'bigint', (c) => c.notNull())
    .addColumn('status_state', 'text')
    .addColumn('status', 'text')
    .addColumn('artifacts', 'text')
    .addColumn('history', 'text')
    .addColumn('metadata', 'text')
    .addColumn('protocol_version', 'text')
    .addPrimaryKeyConstraint('a2a_tasks_pkey', ['tenant', 'owner', 'id'])
    .execute();
  await db.schema
    .createIndex('a2a_tasks_context')
    .on('a2a_tasks')
    .columns(['tenant', 'owner', 'context_id'])
    .execute();
  await db.schema
    .createTable('a2a_contexts')
    .addColumn('agent', 'text', (c) => c.notNull())
    .addColumn('caller', 'text', (c) => c.notNull())
    .addColumn('context_id', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text', (c) =>
      c.notNull().references('chat_sessions.id').onDelete('cascade'),
    )
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('a2a_contexts_pkey', ['agent', 'caller', 'context_id'])
    .execute();
  await db.schema
    .createTable('a2a_remote_agents')
    .addColumn('address', 'text', (c) =>
      c.primaryKey().references('agents.address').onDelete('cascade'),
    )
    .addColumn('owner_id', 'text', (c) => c.notNull())
    .addColumn('card_url', 'text', (c) => c.notNull())
    .addColumn('card', 'text', (c) => c.notNull())
    .addColumn('rpc_url', 'text', (c) => c.notNull())
    .addColumn('protocol_version', 'text', (c) => c.notNull())
    .addColumn('key_ciphertext', 'text', (c) => c.notNull())
    .addColumn('card_read_at', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('a2a_remote_agents_owner')
    .on('a2a_remote_agents')
    .columns(['owner_id', 'created_at'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('a2a_remote_agents').execute();
  await db.schema.dropTable('a2a_contexts').execute();
  await db.schema.dropTable('a2a_tasks').execute();
  await db.schema.dropTable('a2a_access').execute();
}
