import { sql, type Insertable, type Kysely, type Selectable } from 'kysely';
import type { CompiledStatements } from '../compiled.js';
import type { Database, DeliveryEventsTable } from '../schema.js';
import { deleteAgentHistory, slices } from '../statements.js';

export type DeliveryEventRow = Selectable<DeliveryEventsTable>;
export type NewDeliveryEvent = Insertable<DeliveryEventsTable>;

/** The detail of the `stored` row of a message the proxy kept after a failed forward. */
export const KEPT_DETAIL = 'kept after a failed forward';

export { EXPIRED_UNFORWARDED_DETAIL } from '../../wire/deliveries.js';

/**
 * Who owns an agent, and since when (the listing's first registration): the history an owner
 * reads starts there, so that what an agent went through under an earlier owner stays theirs.
 */
export interface Ownership {
  userId: string;
  since: number;
}

/** What a listing of one agent's trace keeps. */
export interface DeliveryFilter {
  /** Only rows at or after this moment (ms). */
  since?: number;
  /** Only these events. */
  events?: string[];
  /** Only this message. */
  uuid?: string;
  limit: number;
  offset: number;
}

/**
 * Inserts trace rows, many per statement, on `statements` compiled once per shape (the rows'
 * count and columns). Run it in the transaction the rows describe.
 */
export async function insertDeliveryEvents(
  db: Kysely<Database>,
  statements: CompiledStatements,
  events: NewDeliveryEvent[],
): Promise<void> {
  for (const slice of slices(events)) {
    await statements.insert(db, 'delivery_events.insert', slice, () =>
      db.insertInto('delivery_events').values(slice),
    );
  }
}

/** As {@link insertDeliveryEvents}, answering the rows written, ids and all. */
export async function insertDeliveryEventsReturning(
  db: Kysely<Database>,
  events: NewDeliveryEvent[],
): Promise<DeliveryEventRow[]> {
  const written: DeliveryEventRow[] = [];
  for (const slice of slices(events)) {
    written.push(
      ...(await db.insertInto('delivery_events').values(slice).returningAll().execute()),
    );
  }
  return written;
}

/**
 * The delivery trace: what happened to the messages of each agent, oldest first. Rows are
 * written beside the changes they describe (see the mailbox repository) and read only by the
 * owner of the agent they name.
 */
export class DeliveriesRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Stores trace rows; answers them as written, for whoever is told of them. */
  record(events: NewDeliveryEvent[]): Promise<DeliveryEventRow[]> {
    return insertDeliveryEventsReturning(this.db, events);
  }

  /** Who owns each of `addresses` that is registered, and since when. */
  async owners(addresses: string[]): Promise<Map<string, Ownership>> {
    if (addresses.length === 0) return new Map();
    const rows = await this.db
      .selectFrom('agents')
      .select(['address', 'user_id', 'registered_at'])
      .where('address', 'in', addresses)
      .execute();
    return new Map(
      rows.map((row) => [row.address, { userId: row.user_id, since: Number(row.registered_at) }]),
    );
  }

  /**
   * Every agent's failures from `since` on, newest first, at most `limit`: messages refused,
   * quarantined or expired unread, and forwards that did not succeed.
   */
  failures(
    since: number,
    limit: number,
  ): Promise<Pick<DeliveryEventRow, 'at' | 'address' | 'event' | 'status_code' | 'detail'>[]> {
    return this.db
      .selectFrom('delivery_events')
      .select(['at', 'address', 'event', 'status_code', 'detail'])
      .where('at', '>=', since)
      .where((eb) =>
        eb.or([
          eb('event', 'in', ['refused', 'quarantined', 'expired']),
          eb.and([
            eb('event', '=', 'forwarded'),
            eb.or([
              eb('status_code', 'is', null),
              eb('status_code', '<', 200),
              eb('status_code', '>=', 300),
            ]),
          ]),
        ]),
      )
      .orderBy('at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
  }

  /**
   * Deletes up to `limit` of the agent's rows recorded up to `until` (when its listing was
   * deleted), and says how many went.
   */
  forget(address: string, until: number, limit: number): Promise<number> {
    return deleteAgentHistory(this.db, 'delivery_events', address, until, limit);
  }

  /**
   * The agent's trace, ordered by time: its rows, and each message still pending as the
   * `submitted` and `stored` rows it stands for (as is the `stored` row a message leaves
   * behind); the `stored` row of a message the proxy kept says so. Within one millisecond a
   * message is submitted before it is stored and stored before anything else happens to it,
   * except the failed forward that made the proxy keep it.
   */
  async list(address: string, filter: DeliveryFilter): Promise<DeliveryEventRow[]> {
    const ofMessage = filter.uuid === undefined ? sql`` : sql` and uuid = ${filter.uuid}`;
    const conditions = [
      ...(filter.since === undefined ? [] : [sql`at >= ${filter.since}`]),
      ...(filter.events === undefined
        ? []
        : [sql`event in (${sql.join(filter.events.map((event) => sql`${event}`))})`]),
    ];
    const where = conditions.length > 0 ? sql`where ${sql.join(conditions, sql` and `)}` : sql``;
    const result = await sql<DeliveryEventRow>`
      with trail as (
        select id, address, event, at, uuid, digest, sender, size, status_code, latency_ms, detail
        from delivery_events where address = ${address}${ofMessage}
        union all
        select id, address, 'stored', received_at, uuid, digest, sender, size,
          cast(null as integer), cast(null as integer),
          case when forward_attempts > 0 then cast(${KEPT_DETAIL} as text) end
        from messages where address = ${address}${ofMessage}
      ), expanded as (
        select * from trail
        union all
        select id, address, 'submitted', at, uuid, digest, sender, size, status_code, latency_ms,
          cast(null as text)
        from trail where event = 'stored'
      )
      select * from expanded ${where}
      order by at,
        case event when 'forwarded' then 0 when 'submitted' then 1 when 'stored' then 2 else 3 end,
        id
      limit ${filter.limit} offset ${filter.offset}`.execute(this.db);
    return result.rows;
  }

  /**
   * Where the envelope with this digest (hex) for `target` went: each message's uuid and
   * sender, from the trace and from the target's pending messages; at most `limit`.
   */
  async findDigest(
    digest: string,
    target: string,
    limit: number,
  ): Promise<Pick<DeliveryEventRow, 'address' | 'uuid' | 'sender'>[]> {
    const result = await sql<Pick<DeliveryEventRow, 'address' | 'uuid' | 'sender'>>`
      select address, uuid, sender from delivery_events
      where digest = ${digest} and address = ${target}
      union
      select address, uuid, sender from messages where address = ${target} and digest = ${digest}
      limit ${limit}`.execute(this.db);
    return result.rows;
  }

  /** The rows with this digest (hex) that name no message (refused before it had a uuid). */
  withoutUuid(digest: string, target: string, limit: number): Promise<DeliveryEventRow[]> {
    return this.db
      .selectFrom('delivery_events')
      .selectAll()
      .where('digest', '=', digest)
      .where('address', '=', target)
      .where('uuid', 'is', null)
      .orderBy('id')
      .limit(limit)
      .execute();
  }

  /**
   * Deletes up to `limit` rows older than `before`, oldest first (rows are added in about
   * the order of their time), and says how many went. A `stored` row is dated when its
   * message arrived but written when the message left, up to a retention period later; it
   * goes when older than `storedBefore` (a retention period earlier), with its leaving row.
   */
  async prune(before: number, storedBefore: number, limit: number): Promise<number> {
    const removed = await this.db
      .deleteFrom('delivery_events')
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('delivery_events')
          .select('id')
          .where((w) =>
            w.or([
              w('at', '<', storedBefore),
              w.and([w('at', '<', before), w('event', '<>', 'stored')]),
            ]),
          )
          .orderBy('id')
          .limit(limit),
      )
      .executeTakeFirst();
    return Number(removed.numDeletedRows);
  }
}
