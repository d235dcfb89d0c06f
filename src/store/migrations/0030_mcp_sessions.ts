import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * MCP sessions (docs/mcp.md): one row per session an MCP client initialized, bound to the API
 * key (and the owner, with `x-team`) it initialized with, so that any process on the database
 * answers its requests. Deleted when the client ends it, when it has been idle too long, or with
 * its key.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('mcp_sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_id', 'text', (c) => c.notNull())
    .addColumn('key_id', 'text', (c) => c.notNull().references('api_keys.id').onDelete('cascade'))
    .addColumn('client_name', 'text')
    .addColumn('client_version', 'text')
    .addColumn('protocol_version', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('last_seen_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('mcp_sessions_last_seen')
    .on('mcp_sessions')
    .columns(['last_seen_at'])
    .execute();
  await db.schema
    .createIndex('mcp_sessions_owner')
    .on('mcp_sessions')
    .columns(['owner_id', 'last_seen_at'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('mcp_sessions').execute();
}
