import type { Insertable } from 'kysely';
import { Store } from '../../src/store/index.js';
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
