import type { Kysely } from 'kysely';
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
