import { copyFileSync, existsSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { sqlitePath } from './database.js';

/**
 * Backups of the embedded SQLite store. A backup is SQLite's online backup, taken while the
 * server runs and writes; a restore puts a backup in the database's place, and refuses while
 * any process has that database open.
 */

/** Something an operator must change before a backup or restore can go ahead. */
export class BackupError extends Error {
  override name = 'BackupError';
}

/** Kysely's bookkeeping table: every Agentry database has it. */
const MIGRATION_TABLE = 'kysely_migration';

function embeddedPath(databaseUrl: string, command: 'backup' | 'restore'): string {
  if (!databaseUrl.startsWith('sqlite:')) {
    const tool = command === 'backup' ? 'pg_dump' : 'pg_restore';
    throw new BackupError(
      `agentry ${command} handles the embedded SQLite database; for PostgreSQL use ${tool} or point-in-time recovery (see docs/operations.md).`,
    );
  }
  const path = sqlitePath(databaseUrl);
  if (path === ':memory:') throw new BackupError('an in-memory database cannot be backed up');
  return path;
}

/** Checks that `path` holds an intact Agentry database; `what` names it in errors. */
function checkDatabase(path: string, what: string): void {
  let sqlite: BetterSqlite3.Database;
  try {
    sqlite = new BetterSqlite3(path, { readonly: true, fileMustExist: true });
  } catch (err) {
    throw new BackupError(`${what} cannot be opened: ${(err as Error).message}`);
  }
  try {
    const check = sqlite.pragma('quick_check', { simple: true });
    if (check !== 'ok') throw new BackupError(`${what} is damaged: ${String(check)}`);
    const migrations = sqlite
      .prepare(`select count(*) as n from sqlite_master where type = 'table' and name = ?`)
      .get(MIGRATION_TABLE) as { n: number };
    if (migrations.n === 0) throw new BackupError(`${what} is not an Agentry database`);
  } catch (err) {
    if (err instanceof BackupError) throw err;
    throw new BackupError(`${what} is not a usable database: ${(err as Error).message}`);
  } finally {
    sqlite.close();
  }
}

export interface BackupOutcome {
  file: string;
  bytes: number;
}

/**
 * Copies the live database at `databaseUrl` to `file`, consistently as of one moment, while
 * other processes go on reading and writing it. The copy is one self-contained file (no
 * write-ahead log beside it); it is written beside `file` and renamed into place, so `file`
 * never holds half a backup.
 */
export async function backupDatabase(databaseUrl: string, file: string): Promise<BackupOutcome> {
  const source = embeddedPath(databaseUrl, 'backup');
  const target = resolve(file);
  if (target === source) throw new BackupError('the backup file cannot be the database itself');
  if (!existsSync(source)) throw new BackupError(`there is no database at ${source}`);
  if (!existsSync(dirname(target))) {
    throw new BackupError(`the directory ${dirname(target)} does not exist`);
  }
  const partial = `${target}.partial-${process.pid}`;
  const sqlite = new BetterSqlite3(source, { fileMustExist: true });
  try {
    sqlite.pragma('busy_timeout = 5000');
    // All pages in one step, inside one read transaction: a snapshot of one moment. Copied
    // in small steps instead, every commit of the server would restart the copy. In WAL
    // mode the reader does not hold up the server's commits.
    await sqlite.backup(partial, { progress: () => 0x7fffffff });
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  } finally {
    sqlite.close();
  }
  try {
    const copy = new BetterSqlite3(partial);
    try {
      copy.pragma('journal_mode = DELETE');
    } finally {
      copy.close();
    }
    checkDatabase(partial, 'the backup');
    renameSync(partial, target);
  } finally {
    rmSync(partial, { force: true });
    rmSync(`${partial}-wal`, { force: true });
    rmSync(`${partial}-shm`, { force: true });
  }
  return { file: target, bytes: statSync(target).size };
}

export interface RestoreOutcome {
  database: string;
  /** Where the database that was replaced now lies, if there was one. */
  replaced: string | undefined;
}

/**
 * Puts the backup `file` in the place of the database at `databaseUrl`. Refuses while any
 * process has that database open: leaving write-ahead-log mode needs every other connection
 * gone, so the attempt tells. The database replaced is kept beside it as `.before-restore`.
 */
export function restoreDatabase(file: string, databaseUrl: string): RestoreOutcome {
  const target = embeddedPath(databaseUrl, 'restore');
  const backup = resolve(file);
  if (backup === target) throw new BackupError('the backup file is the database itself');
  checkDatabase(backup, `the backup ${backup}`);

  let replaced: string | undefined;
  let lock: BetterSqlite3.Database | undefined;
  if (existsSync(target)) {
    lock = new BetterSqlite3(target, { fileMustExist: true });
    try {
      lock.pragma('busy_timeout = 0');
      // Holds the file's lock from the first statement until this connection closes.
      lock.pragma('locking_mode = EXCLUSIVE');
      const mode = lock.pragma('journal_mode = DELETE', { simple: true });
      if (mode !== 'delete') throw new Error(`journal mode stayed ${String(mode)}`);
      lock.exec('begin exclusive');
    } catch (err) {
      lock.close();
      throw new BackupError(
        `the database ${target} is in use (is a server running on it?); stop every process that uses it, then restore (${(err as Error).message})`,
      );
    }
    replaced = `${target}.before-restore`;
  }
  const incoming = `${target}.restoring-${process.pid}`;
  try {
    copyFileSync(backup, incoming);
    if (replaced) copyFileSync(target, replaced);
    renameSync(incoming, target);
  } finally {
    rmSync(incoming, { force: true });
    lock?.close();
  }
  // With the log mode left, neither companion file belongs to the restored database.
  rmSync(`${target}-wal`, { force: true });
  rmSync(`${target}-shm`, { force: true });
  return { database: target, replaced };
}
