import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Crash loops and probe sessions left behind.
 *
 * - `hosted_failures.crashes`: a hosted agent's failure (docs/hosting.md, "Errors") counts the
 *   crashes of its process (and its failures to start) besides the errors its code wrote.
 * - `retired_probe_sessions`: the chat session an agent's probes were sent in, once its owner
 *   turned them off (docs/activity.md, "Health"). Its entries are pruned as those of a live
 *   probe session are, until none is left; then the row goes.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .alterTable('hosted_failures')
    .addColumn('crashes', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .createTable('retired_probe_sessions')
    .addColumn('session_id', 'text', (c) =>
      c.primaryKey().references('chat_sessions.id').onDelete('cascade'),
    )
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('retired_at', 'bigint', (c) => c.notNull())
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('retired_probe_sessions').execute();
  await db.schema.alterTable('hosted_failures').dropColumn('crashes').execute();
}
