import { randomUUID } from 'node:crypto';
import { defaults } from '../../src/config/index.js';
import { sql, type Insertable } from 'kysely';
import { Store } from '../../src/store/index.js';
import type { NewMessage } from '../../src/store/probes.js';
import type { NewActivity } from '../../src/store/repositories/activity.js';
import type { DeliveryEventsTable } from '../../src/store/schema.js';

/** Opens the (already migrated) store of a running server from the benchmark process. */
export function openStore(databaseUrl: string): Store {
  return Store.open(databaseUrl, { poolSize: 2 });
}

/**
 * Agents of `addresses` with their mailboxes, owned by the first user, written straight into
 * the store (registering 10,000 through the API would take minutes of signing and requests).
 * `registeredAt` dates their registration (now unless given): an owner sees what happened to
 * an agent from then on.
 */
export async function openMailboxes(
  store: Store,
  addresses: string[],
  registeredAt = Date.now(),
): Promise<void> {
  const owner = await store.db.selectFrom('users').select('id').executeTakeFirstOrThrow();
  const now = registeredAt;
  for (let from = 0; from < addresses.length; from += 1000) {
    const slice = addresses.slice(from, from + 1000);
    await store.db
      .insertInto('agents')
      .values(
        slice.map((address) => ({
          address,
          user_id: owner.id,
          name: 'held',
          agent_type: 'mailbox',
          profile: '{}',
          endpoints: '[]',
          protocols: '[]',
          registered_at: now,
          updated_at: now,
        })),
      )
      .execute();
    await store.db
      .insertInto('mailboxes')
      .values(
        slice.map((address) => ({
          address,
          user_id: owner.id,
          created_at: now,
          pending_messages: 0,
          bytes_stored: 0,
        })),
      )
      .execute();
  }
}

/** Messages stored per delivery while seeding (one statement on PostgreSQL). */
const DELIVERY_BATCH = 1000;

/** The service's default mailbox retention. */
const RETENTION_MS = defaults.mailboxRetentionSeconds * 1000;

/** Where a load of messages goes and what they carry, each list used in turn. */
export interface MessageSource {
  envelopes: string[];
  targets: string[];
}

/**
 * Message `i` of a load from `source`, as the service would have stored it at `now`: a
 * version-4 uuid, the next target and envelope text in turn, the default retention.
 */
export function messageRow(source: MessageSource, i: number, now = Date.now()): NewMessage {
  const envelope = source.envelopes[i % source.envelopes.length]!;
  return {
    uuid: randomUUID(),
    address: source.targets[i % source.targets.length]!,
    envelope,
    size: Buffer.byteLength(envelope),
    received_at: now,
    expires_at: now + RETENTION_MS,
  };
}

/** What {@link seedMessages} writes: `count` messages for `addresses`, `envelopes` in turn. */
export interface SeedOptions {
  addresses: string[];
  count: number;
  envelopes: string[];
}

/**
 * `count` messages spread round-robin over the mailboxes of `addresses`, written straight
 * into the store as the service stores them (version-4 uuids, the given envelope texts in
 * turn, the default retention, the mailboxes' counters and owners' usage moved to match). On
 * PostgreSQL the table is then vacuumed and analysed, as autovacuum does for a table that
 * grows over days; a load of this size in seconds outruns it, and the planner would work
 * from the statistics of a table a hundredth of the size. A checkpoint then writes this load
 * out, so that its disk flushes, paced over minutes, do not fall into the measurement that
 * follows (`freshDatabase` does the same for what the scenario before left).
 */
export async function seedMessages(store: Store, options: SeedOptions): Promise<void> {
  const { addresses, count, envelopes } = options;
  const now = Date.now();
  const day = new Date(now).toISOString().slice(0, 10);
  for (let from = 0; from < count; from += DELIVERY_BATCH) {
    const batch: NewMessage[] = [];
    for (let i = from; i < Math.min(count, from + DELIVERY_BATCH); i++) {
      batch.push(messageRow({ envelopes, targets: addresses }, i, now));
    }
    await store.repos.mailbox.deliver(batch, day);
  }
  if (store.dialect === 'postgres') {
    await sql`vacuum analyze messages`.execute(store.db);
    // Only a superuser or a member of pg_checkpoint may; without it the run goes on.
    await sql`checkpoint`.execute(store.db).catch(() => undefined);
  }
}

/** What {@link seedTimeline} writes. */
export interface TimelineSeed {
  /** Agents the rows are spread over; the first gets `bigShare` of them, the rest equal parts. */
  addresses: string[];
  rows: number;
  bigShare: number;
  /** The rows are dated evenly from `from` to `to` (ms), in the order they are written. */
  from: number;
  to: number;
}

/** Rows per insert statement while seeding a timeline, and statements per transaction. */
const TIMELINE_BATCH = 1000;
const TIMELINE_BATCHES_PER_TRANSACTION = 20;

/**
 * Timeline rows written straight into the store, in the order of their time as a service
 * would have written them (the agents' rows interleaved): of every four rows, three are events
 * the agents reported (`agent_activity`: mostly messages, one in twenty information, one in
 * fifty an error with its traceback) and one is a trace row of a message handed to a poll or
 * acknowledged (`delivery_events`). Multi-row inserts of {@link TIMELINE_BATCH}, several per
 * transaction; then on PostgreSQL vacuum, analyse and checkpoint as {@link seedMessages} does,
 * and on SQLite a checkpoint.
 */
export async function seedTimeline(store: Store, options: TimelineSeed): Promise<void> {
  const { addresses, rows, bigShare, from, to } = options;
  const others = addresses.length - 1;
  const step = (to - from) / rows;
  // Row n goes to the big agent when its share so far falls behind, else to the next other;
  // what a row is follows the count of its agent's rows.
  let big = 0;
  let other = 0;
  const counts = new Map<string, number>();
  const agentOf = (n: number): { address: string; k: number } => {
    let address: string;
    if (others === 0 || big < (n + 1) * bigShare) {
      big += 1;
      address = addresses[0]!;
    } else {
      address = addresses[1 + (other++ % others)]!;
    }
    const k = counts.get(address) ?? 0;
    counts.set(address, k + 1);
    return { address, k };
  };
  const traceback =
    'Traceback (most recent call last):\n  File "agent.py", line 12, in handler\n    1 / 0\nZeroDivisionError: division by zero\n';
  const platform = { python_version: '3.11.7', processor: 'x86_64', sdk_version: '0.4.2' };
  for (let start = 0; start < rows; start += TIMELINE_BATCH * TIMELINE_BATCHES_PER_TRANSACTION) {
    await store.db.transaction().execute(async (trx) => {
      const end = Math.min(rows, start + TIMELINE_BATCH * TIMELINE_BATCHES_PER_TRANSACTION);
      for (let first = start; first < end; first += TIMELINE_BATCH) {
        const events: NewActivity[] = [];
        const trace: Insertable<DeliveryEventsTable>[] = [];
        for (let n = first; n < Math.min(end, first + TIMELINE_BATCH); n++) {
          const { address, k } = agentOf(n);
          const at = Math.floor(from + n * step);
          const peer = addresses[(n * 7919) % addresses.length]!;
          if (k % 4 === 3) {
            trace.push({
              address,
              event: k % 8 === 3 ? 'polled' : 'deleted',
              at,
              uuid: randomUUID(),
              digest: null,
              sender: peer,
              size: 600,
              status_code: null,
              latency_ms: null,
              detail: null,
            });
            continue;
          }
          const kind = k % 50 === 0 ? 'error' : k % 20 === 1 ? 'info' : 'message';
          const session = randomUUID();
          events.push({
            address,
            kind: `event.${kind}`,
            at,
            event_id: randomUUID(),
            category: kind === 'message' ? 'system' : 'user',
            peer: kind === 'message' ? peer : null,
            session: kind === 'message' ? session : null,
            message:
              kind === 'error'
                ? 'division by zero'
                : kind === 'info'
                  ? 'handled a request'
                  : `Message received from ${peer}`,
            data: JSON.stringify({
              ...(kind === 'error' ? { exception: 'ZeroDivisionError', traceback } : {}),
              ...(kind === 'message'
                ? {
                    metadata: {
                      direction: 'received',
                      peer,
                      msg_id: randomUUID(),
                      session_id: session,
                    },
                  }
                : {}),
              platform,
            }),
          });
        }
        if (events.length > 0) await trx.insertInto('agent_activity').values(events).execute();
        if (trace.length > 0) await trx.insertInto('delivery_events').values(trace).execute();
      }
    });
  }
  if (store.dialect === 'postgres') {
    await sql`vacuum analyze agent_activity`.execute(store.db);
    await sql`vacuum analyze delivery_events`.execute(store.db);
    await sql`checkpoint`.execute(store.db).catch(() => undefined);
  } else {
    // Hundreds of megabytes of log would otherwise be copied into the database by the
    // server's background checkpoints during the measurement that follows.
    await sql`pragma wal_checkpoint(truncate)`.execute(store.db);
  }
}
