import type BetterSqlite3 from 'better-sqlite3';

/**
 * The passes of the checkpoint thread ({@link BackgroundCheckpointer}): each copies committed
 * pages from the write-ahead log into the database file, then, if anything was committed
 * since the last pass that did so, has the file synced.
 *
 * SQLite syncs the database file only at the end of a checkpoint that copies the whole log.
 * Under a steady flow of commits no pass does (more are committed while it copies), so what
 * the passes copied would wait in the system's cache until the service connection's backstop
 * checkpoint synced it all at once, on the event loop. Synced after each pass, it leaves that
 * commit only the pages copied since.
 */
export class CheckpointPasses {
  /** `PRAGMA data_version` when the last pass that synced began: it moves with every commit. */
  private syncedVersion: number | undefined;

  constructor(
    /** The thread's own connection to the database. */
    private readonly sqlite: BetterSqlite3.Database,
    /** Writes the database file's pages to the disk (`fdatasync`). */
    private readonly syncDatabaseFile: () => void,
  ) {}

  /** Runs one pass; answers whether it synced the file. */
  pass(): boolean {
    // Read first: whatever this pass copies was committed before it, or moves it again for
    // the next pass.
    const version = this.sqlite.pragma('data_version', { simple: true }) as number;
    // PASSIVE never waits for, or holds up, the service's writer and readers.
    this.sqlite.pragma('wal_checkpoint(PASSIVE)');
    if (version === this.syncedVersion) return false;
    this.syncDatabaseFile();
    this.syncedVersion = version;
    return true;
  }
}
