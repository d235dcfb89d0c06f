import type { Kysely } from 'kysely';
import { dialectOf } from '../dialect.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * What agents are doing (docs/activity.md). `agent_activity` holds what the delivery trace
 * does not: the events agents report (`POST /v1/events`, deduplicated on the agent's own event
 * id), registrations, Almanac changes, status changes and the start and end of polling. The
 * timeline reads it beside the trace. `agent_presence` keeps, per agent, when it was last
 * seen and how its last forward and its last reported error went, from which its status is
 * derived, and the status last announced, so that a change is recorded once.
 */
export async function up(db: AnyDb): Promise<void> {
  const dialect = dialectOf(db);
  await dialect
    .addIdentityColumn(db.schema.createTable('agent_activity'), 'id')
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('at', 'bigint', (c) => c.notNull())
    .addColumn('event_id', 'text')
    .addColumn('category', 'text')
    .addColumn('peer', 'text')
    .addColumn('session', 'text')
    .addColumn('message', 'text')
    .addColumn('data', 'text')
    .execute();
  await db.schema
    .createIndex('agent_activity_address_at')
    .on('agent_activity')
    .columns(['address', 'at'])
    .execute();
  await db.schema
    .createIndex('agent_activity_event_id')
    .on('agent_activity')
    .columns(['address', 'event_id'])
    .unique()
    .execute();
  await db.schema
    .createTable('agent_presence')
    .addColumn('address', 'text', (c) => c.primaryKey())
    .addColumn('last_seen_at', 'bigint')
    .addColumn('last_poll_at', 'bigint')
    .addColumn('forward_ok_at', 'bigint')
    .addColumn('forward_failed_at', 'bigint')
    .addColumn('forward_error', 'text')
    .addColumn('error_at', 'bigint')
    .addColumn('error', 'text')
    .addColumn('inactive_at', 'bigint')
    .addColumn('status', 'text')
    .addColumn('status_at', 'bigint')
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('agent_presence').execute();
  await db.schema.dropTable('agent_activity').execute();
}
