import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * A timeline filtered by kind (docs/activity.md, "The timeline") reads each kind asked for
 * through an `(agent, kind, time)` index: without one, a page of a rare kind (errors among an
 * agent's 150,000 events, refusals among its trace) went through every row of the agent
 * newer than the hundredth match, and one of a kind the agent never had through all of them.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createIndex('agent_activity_address_kind_at')
    .on('agent_activity')
    .columns(['address', 'kind', 'at'])
    .execute();
  await db.schema
    .createIndex('delivery_events_address_event_at')
    .on('delivery_events')
    .columns(['address', 'event', 'at'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('delivery_events_address_event_at').execute();
  await db.schema.dropIndex('agent_activity_address_kind_at').execute();
}
