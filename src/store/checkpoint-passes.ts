import type BetterSqlite3 from 'better-sqlite3';

/** What `PRAGMA wal_checkpoint` answers: busy, and the log's frames and those copied. */
interface CheckpointResult {
  busy: number;
  log: number;
  checkpointed: number;
}

/**
 * Rounds one pass runs at most. Each round copies what was committed while the one before it
 * copied, a little each time; a writer that outpaces the copy would otherwise keep a pass going.
 */
const MAX_ROUNDS = 10;

/**
 * The passes of the checkpoint thread ({@link BackgroundCheckpointer}): each copies committed
 * pages from the write-ahead log into the database file, then, if anything was committed
 * since the last pass that did so, has the file synced.
 *
 * A checkpoint copies the log as far as it was when the checkpoint began. SQLite writes the log
 * again from its beginning only when a write begins with the whole log copied; under a steady
 * flow of commits a single checkpoint never leaves it so (more are committed while it copies),
 * and the log grew until the service connection's backstop checkpoint copied the rest on the
 * event loop, with three syncs (a commit of 5–6 ms about once a second at 1,000 Almanac
 * registrations a second). So a pass checkpoints again until a round finds nothing committed
 * since the round before: the log is then copied to its end, and the next commit starts it
 * again, syncing little more than the log's header.
 *
 * SQLite syncs the database file only at the end of a checkpoint that copies the whole log.
 * When a pass stops short of that, what it copied would wait in the system's cache until some
 * later checkpoint synced it all at once. Synced after each pass, it leaves that one only the
 * pages copied since.
 */
export class CheckpointPasses {
  /** `PRAGMA data_version` when the last pass that synced began: it moves with every commit. */
  private syncedVersion: number | undefined;
  /** One checkpoint, prepared once: a pass may run it ten times. */
  private readonly checkpoint: BetterSqlite3.Statement<[], CheckpointResult>;

  constructor(
    /** The thread's own connection to the database. */
    private readonly sqlite: BetterSqlite3.Database,
    /** Writes the database file's pages to the disk (`fdatasync`). */
    private readonly syncDatabaseFile: () => void,
  ) {
    // PASSIVE never waits for, or holds up, the service's writer and readers.
    this.checkpoint = sqlite.prepare('PRAGMA wal_checkpoint(PASSIVE)');
  }

  /** Runs one pass; answers whether it synced the file. */
  pass(): boolean {
    // Read first: whatever this pass copies was committed before it, or moves it again for
    // the next pass.
    const version = this.sqlite.pragma('data_version', { simple: true }) as number;
    this.copyLog();
    if (version === this.syncedVersion) return false;
    this.syncDatabaseFile();
    this.syncedVersion = version;
    return true;
  }

  /**
   * Checkpoints until a round finds the log as the round before left it, all of it copied; or
   * stops for the next pass to go on when the service's connection is checkpointing itself
   * (`busy`) or a reader holds part of the log back.
   */
  private copyLog(): void {
    /** The log's frames when the round before began. */
    let before: number | undefined;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const { busy, log, checkpointed } = this.checkpoint.get()!;
      if (busy !== 0 || checkpointed < log || log === before) return;
      before = log;
    }
  }
}
