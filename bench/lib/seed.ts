import { randomUUID } from 'node:crypto';
import { defaults } from '../../src/config/index.js';
import { sql } from 'kysely';
import { Store } from '../../src/store/index.js';
import type { NewMessage } from '../../src/store/probes.js';

/** Opens the (already migrated) store of a running server from the benchmark process. */
export function openStore(databaseUrl: string): Store {
  return Store.open(databaseUrl, { poolSize: 2 });
}

/**
 * Agents of `addresses` with their mailboxes, owned by the first user, written straight into
 * the store (registering 10,000 through the API would take minutes of signing and requests).
 */
export async function openMailboxes(store: Store, addresses: string[]): Promise<void> {
  const owner = await store.db.selectFrom('users').select('id').executeTakeFirstOrThrow();
  const now = Date.now();
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
  const period = new Date(now).toISOString().slice(0, 7);
  for (let from = 0; from < count; from += DELIVERY_BATCH) {
    const batch: NewMessage[] = [];
    for (let i = from; i < Math.min(count, from + DELIVERY_BATCH); i++) {
      batch.push(messageRow({ envelopes, targets: addresses }, i, now));
    }
    await store.repos.mailbox.deliver(batch, period);
  }
  if (store.dialect === 'postgres') {
    await sql`vacuum analyze messages`.execute(store.db);
    // Only a superuser or a member of pg_checkpoint may; without it the run goes on.
    await sql`checkpoint`.execute(store.db).catch(() => undefined);
  }
}
