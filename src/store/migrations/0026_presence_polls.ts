import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * What presence knows of an agent's mailbox polls and work (docs/activity.md, "Status"):
 * `poll_started_at` is when its latest poll began and `poll_until` when that poll ends (a held
 * poll: its deadline, until it ends; then when it ended); `poll_gap_ms` is how long it last
 * waited between the end of a poll and the start of the next (its cadence; null: not yet
 * seen). `last_worked_at` is when it last did something other than wait: was handed a
 * message, acknowledged one, called with its attestation.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('agent_presence').addColumn('poll_started_at', 'bigint').execute();
  await db.schema.alterTable('agent_presence').addColumn('poll_until', 'bigint').execute();
  await db.schema.alterTable('agent_presence').addColumn('poll_gap_ms', 'bigint').execute();
  await db.schema.alterTable('agent_presence').addColumn('last_worked_at', 'bigint').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('agent_presence').dropColumn('last_worked_at').execute();
  await db.schema.alterTable('agent_presence').dropColumn('poll_gap_ms').execute();
  await db.schema.alterTable('agent_presence').dropColumn('poll_until').execute();
  await db.schema.alterTable('agent_presence').dropColumn('poll_started_at').execute();
}
