import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * `servers`: where each server process on this database listens (docs/operations.md), so that
 * `agentry status` finds the server this database serves. A server adds its row once it
 * listens, says every half minute that it is still there, and removes the row when it stops;
 * a row not heard of for two minutes is a server that ended without saying so.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('servers')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('host', 'text', (c) => c.notNull())
    .addColumn('pid', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'bigint', (c) => c.notNull())
    .addColumn('seen_at', 'bigint', (c) => c.notNull())
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('servers').execute();
}
