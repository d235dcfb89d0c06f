import { randomUUID } from 'node:crypto';
import { defaults } from '../../src/config/index.js';
import { sql, type Insertable } from 'kysely';
import { Store } from '../../src/store/index.js';
import type { NewMessage } from '../../src/store/repositories/messages.js';
import type { Database } from '../../src/store/schema.js';

/** Bound parameters per statement, under SQLite's limit (32,766) and PostgreSQL's (65,535). */
const MAX_PARAMETERS = 30_000;

/**
 * Writes many rows fast, straight into a table of a running server's store (for the
 * background a scenario needs, such as messages for other agents): multi-row INSERTs, one
 * transaction per statement. Returns the number of rows written.
 */
export async function insertInBatches<T extends keyof Database & string>(
  store: Store,
  table: T,
  rows: Iterable<Insertable<Database[T]>>,
): Promise<number> {
  let batch: Insertable<Database[T]>[] = [];
  let batchSize = 0;
  let written = 0;
  const flush = async (): Promise<void> => {
    if (batch.length === 0) return;
    // Kysely checks every row's columns against the table, which the generic T hides.
    await store.db
      .insertInto(table)
      .values(batch as never)
      .execute();
    written += batch.length;
    batch = [];
  };
  for (const row of rows) {
    batchSize ||= Math.max(1, Math.floor(MAX_PARAMETERS / Object.keys(row).length));
    batch.push(row);
    if (batch.length >= batchSize) await flush();
  }
  await flush();
  return written;
}

/** Opens the (already migrated) store of a running server from the benchmark process. */
export function openStore(databaseUrl: string): Store {
  return Store.open(databaseUrl, { poolSize: 2 });
}

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

/**
 * `count` messages spread round-robin over the mailboxes of `addresses`, written straight
 * into the store as the service would have stored them (version-4 uuids, the given envelope
 * texts in turn, the default retention), with the mailboxes' counters moved to match. On
 * PostgreSQL the table is then vacuumed and analysed, as autovacuum does for a table that
 * grows over days; a load of this size in seconds outruns it, and the planner would work
 * from the statistics of a table a hundredth of the size. A checkpoint then writes this load
 * out, so that its disk flushes, paced over minutes, do not fall into the measurement that
 * follows (`freshDatabase` does the same for what the scenario before left).
 */
export async function seedMessages(
  store: Store,
  options: { addresses: string[]; count: number; envelopes: string[] },
): Promise<void> {
  const { addresses, count, envelopes } = options;
  const now = Date.now();
  function* rows(): Generator<NewMessage> {
    for (let i = 0; i < count; i++) yield messageRow({ envelopes, targets: addresses }, i, now);
  }
  await insertInBatches(store, 'messages', rows());
  const sizes = envelopes.map((envelope) => Buffer.byteLength(envelope));
  await store.repos.mailboxes.countMany(
    addresses.map((address, a) => {
      let messages = 0;
      let bytes = 0;
      for (let i = a; i < count; i += addresses.length) {
        messages += 1;
        bytes += sizes[i % sizes.length]!;
      }
      return { address, messages, bytes };
    }),
  );
  if (store.dialect === 'postgres') {
    await sql`vacuum analyze messages`.execute(store.db);
    // Only a superuser or a member of pg_checkpoint may; without it the run goes on.
    await sql`checkpoint`.execute(store.db).catch(() => undefined);
  }
}
