import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** Rows per INSERT: 6 parameters each stays far below either database's limit. */
export const MAX_ROWS_PER_INSERT = 1000;

/** Runs `work` in a transaction, or in the one `db` already is. */
export function atomically<T>(
  db: Kysely<Database>,
  work: (db: Kysely<Database>) => Promise<T>,
): Promise<T> {
  return db.isTransaction ? work(db) : db.transaction().execute(work);
}
