import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Outages of proxy agents (docs/mailbox.md, "Kept forwards"): one row per agent whose forwards
 * are failing, from the first failed forward until one goes through. While it lasts, the
 * agent's kept messages are not forwarded one by one: one attempt per back-off step
 * (`next_at`, moved to the end of a claim's lease by the process that makes the attempt) tries
 * the agent, and `failures` counts those attempts for the back-off. `messages` counts the
 * messages that could not be forwarded meanwhile, `entry_id` is the agent's timeline row that
 * stands for the outage. The row goes with its agent.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('forward_outages')
    .addColumn('address', 'text', (c) =>
      c.primaryKey().references('agents.address').onDelete('cascade'),
    )
    .addColumn('began_at', 'bigint', (c) => c.notNull())
    .addColumn('last_failed_at', 'bigint', (c) => c.notNull())
    .addColumn('failures', 'integer', (c) => c.notNull())
    .addColumn('messages', 'integer', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('next_at', 'bigint', (c) => c.notNull())
    .addColumn('entry_id', 'bigint')
    .execute();
  await db.schema
    .createIndex('forward_outages_next_at')
    .on('forward_outages')
    .column('next_at')
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('forward_outages').execute();
}
