import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Federation (docs/federation.md).
 *
 * - `federation_identity`: this instance's agent key (one row), sealed with the server's sealing
 *   key; its address is the instance's identity, which signs its requests to peers.
 * - `published_agents`: the agents whose owner publishes them to the peers and upstreams. No
 *   row: not published. Goes with the agent.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('federation_identity')
    .addColumn('id', 'integer', (c) => c.primaryKey())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('key_ciphertext', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('published_agents')
    .addColumn('address', 'text', (c) =>
      c.primaryKey().references('agents.address').onDelete('cascade'),
    )
    .addColumn('published_at', 'bigint', (c) => c.notNull())
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('published_agents').execute();
  await db.schema.dropTable('federation_identity').execute();
}
