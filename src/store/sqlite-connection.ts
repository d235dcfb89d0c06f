import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';

/**
 * A better-sqlite3 connection with the settings the service runs on (the background
 * checkpoint thread opens its own with them). A module of its own: that thread loads this
 * alone, not the store.
 */
export function openSqliteConnection(path: string): BetterSqlite3.Database {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const sqlite = new BetterSqlite3(path);
  // WAL lets readers proceed while one writer commits; NORMAL keeps commits durable against
  // a process crash (the WAL is written before the commit returns) at a fraction of FULL's
  // fsync cost. A power loss may roll back the last transactions, never corrupt the file.
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  return sqlite;
}
