import { sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';

/** Rows per INSERT: 6 parameters each stays far below either database's limit. */
export const MAX_ROWS_PER_INSERT = 1000;

/** `items` in consecutive slices of at most `size`: one statement's worth each. */
export function* slices<T>(items: readonly T[], size = MAX_ROWS_PER_INSERT): Generator<T[]> {
  for (let from = 0; from < items.length; from += size) yield items.slice(from, from + size);
}

/** Runs `work` in a transaction, or in the one `db` already is. */
export function atomically<T>(
  db: Kysely<Database>,
  work: (db: Kysely<Database>) => Promise<T>,
): Promise<T> {
  return db.isTransaction ? work(db) : db.transaction().execute(work);
}

/** The tables that hold an agent's history: each row's key, and the moment it was recorded. */
const AGENT_HISTORY = {
  delivery_events: { key: 'id', time: 'at' },
  agent_activity: { key: 'id', time: 'at' },
  webhook_deliveries: { key: 'seq', time: 'created_at' },
} as const;

/**
 * Deletes up to `limit` of the rows of `table` about the agent `address` that were recorded up
 * to `until` (when its listing was deleted), and says how many went: an agent's history goes a
 * batch at a time, so that no statement holds the writer for long.
 */
export async function deleteAgentHistory(
  db: Kysely<Database>,
  table: keyof typeof AGENT_HISTORY,
  address: string,
  until: number,
  limit: number,
): Promise<number> {
  const { key, time } = AGENT_HISTORY[table];
  const result = await sql`
    delete from ${sql.table(table)} where ${sql.ref(key)} in (
      select ${sql.ref(key)} from ${sql.table(table)}
      where address = ${address} and ${sql.ref(time)} <= ${until}
      limit ${limit})`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
