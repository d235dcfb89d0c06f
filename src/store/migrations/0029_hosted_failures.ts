import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Failures of hosted agents (docs/hosting.md, "Errors"): one row per hosted agent whose code
 * raises, from its first error until it has run without one for the error window. `errors`
 * counts the errors meanwhile, `error` is the last one, `entry_id` the agent's timeline row
 * that stands for the failure (updated as it goes). The row goes with its agent.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('hosted_failures')
    .addColumn('address', 'text', (c) =>
      c.primaryKey().references('hosted_agents.address').onDelete('cascade'),
    )
    .addColumn('began_at', 'bigint', (c) => c.notNull())
    .addColumn('last_at', 'bigint', (c) => c.notNull())
    .addColumn('errors', 'integer', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('entry_id', 'bigint')
    .execute();
  await db.schema
    .createIndex('hosted_failures_last_at')
    .on('hosted_failures')
    .column('last_at')
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('hosted_failures').execute();
}
