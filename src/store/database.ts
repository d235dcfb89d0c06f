import { existsSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import {
  CompiledQuery,
  Kysely,
  PostgresDialect,
  SqliteDialect,
  SqliteDriver,
  type DatabaseConnection,
  type Driver,
  type PostgresCursor,
  type PostgresPool,
  type PostgresPoolClient,
  type PostgresQueryResult,
  type SqliteDatabase,
  type SqliteDialectConfig,
} from 'kysely';
import pg from 'pg';
import { BackgroundCheckpointer } from './checkpointer.js';
import { openSqliteConnection } from './sqlite-connection.js';
import type { Database } from './schema.js';

import { defaults } from '../config/index.js';
import type { DialectName } from './dialect.js';

export interface DatabaseHandle {
  db: Kysely<Database>;
  dialect: DialectName;
  /**
   * Marks `sql` as a statement each connection keeps prepared once it has run it. PostgreSQL
   * otherwise parses and plans every statement it is sent; SQLite keeps every statement
   * prepared already ({@link withStatementCache}).
   */
  keepPrepared(sql: string): void;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** Connections in the PostgreSQL pool (default: the configuration's default). */
  poolSize?: number;
  /**
   * SQLite: checkpoint from a worker thread rather than on the event loop (see
   * {@link BackgroundCheckpointer}); `onError` hears if that thread fails.
   */
  backgroundCheckpoints?: { onError(error: unknown): void };
}

/** How often the background thread checkpoints. */
const CHECKPOINT_INTERVAL_MS = 100;
/**
 * Log pages after which a commit checkpoints by itself (SQLite's default is 1000): a backstop
 * while a background thread does the work, about 40 MB of log.
 */
const BACKSTOP_CHECKPOINT_PAGES = 10_000;

/** Resolves `sqlite:./data/agentry.db` (or `sqlite::memory:`) to a file path. */
export function sqlitePath(url: string): string {
  const path = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
  return path === ':memory:' ? path : resolve(path);
}

/**
 * Kysely prepares every query afresh, and compiling a statement costs better-sqlite3 about as
 * much as running a small one: keep compiled statements by their text. Kysely's SQL is
 * parameterised, so there are few distinct texts; the bound only guards against `in (…)`
 * lists of many lengths. Sharing is safe: the one connection runs one statement at a time.
 */
function withStatementCache(sqlite: BetterSqlite3.Database, limit = 1000): SqliteDatabase {
  const statements = new Map<string, BetterSqlite3.Statement>();
  return {
    close: () => sqlite.close(),
    prepare(sql) {
      let statement = statements.get(sql);
      if (statement === undefined) {
        statement = sqlite.prepare(sql);
        if (statements.size >= limit) statements.delete(statements.keys().next().value as string);
        statements.set(sql, statement);
      }
      return statement;
    },
  };
}

/**
 * Transactions that take the write lock when they begin. Kysely begins deferred ones, which
 * take it at their first write: if another process (an admin command, a second server on the
 * same file) committed after such a transaction's first read, its first write fails at once
 * with SQLITE_BUSY_SNAPSHOT, which no busy timeout retries. Beginning immediately makes the
 * transaction wait for the lock (up to `busy_timeout`) before it reads anything instead.
 * Within one process nothing changes: Kysely runs one transaction at a time on the one
 * connection.
 */
class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

class ImmediateSqliteDialect extends SqliteDialect {
  constructor(private readonly settings: SqliteDialectConfig) {
    super(settings);
  }

  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.settings);
  }
}

function openSqlite(url: string, options: DatabaseOptions): DatabaseHandle {
  const path = sqlitePath(url);
  const sqlite = openSqliteConnection(path);
  let checkpointer: BackgroundCheckpointer | undefined;
  if (options.backgroundCheckpoints && path !== ':memory:') {
    sqlite.pragma(`wal_autocheckpoint = ${BACKSTOP_CHECKPOINT_PAGES}`);
    checkpointer = BackgroundCheckpointer.start(
      path,
      CHECKPOINT_INTERVAL_MS,
      options.backgroundCheckpoints.onError,
    );
  }
  const db = new Kysely<Database>({
    dialect: new ImmediateSqliteDialect({ database: withStatementCache(sqlite) }),
  });
  return {
    db,
    dialect: 'sqlite',
    // Every statement is kept prepared already.
    keepPrepared: () => {},
    close: async () => {
      await checkpointer?.stop();
      await db.destroy();
    },
  };
}

// int8 and numeric arrive as strings by default; every such value here (epoch milliseconds,
// counters, byte totals) fits in a double exactly.
const pgTypes = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === pg.types.builtins.INT8 || oid === pg.types.builtins.NUMERIC) return Number;
    return pg.types.getTypeParser(oid, format);
  },
};

/**
 * How pg connects to a `postgres://` URL: as written, with `postgres` as the user when the URL
 * names none (pg would fall back to $USER, which is unset in many containers).
 */
export function postgresConnection(url: string): pg.ClientConfig {
  return { connectionString: url, ...(new URL(url).username ? {} : { user: 'postgres' }) };
}

/**
 * Settings of the pool's sessions. JIT compilation is off: it pays for long analytical
 * statements, and the most recent registrations at 100,000 agents cost enough by PostgreSQL's
 * estimate to have 0.7 s of compiling added to 0.3 s of work. Options the URL gives
 * (`?options=-c ...`) come after these, so that an operator's own win.
 */
const POOL_SESSION_OPTIONS = '-c jit=off';

/** How the pool connects to `url`: {@link postgresConnection}, with its sessions' settings. */
export function pooledConnection(url: string): pg.ClientConfig {
  const parsed = new URL(url);
  const given = parsed.searchParams.get('options');
  if (given === null) return { ...postgresConnection(url), options: POOL_SESSION_OPTIONS };
  // pg takes the URL's options over the configuration's: they go into the configuration.
  parsed.searchParams.delete('options');
  return {
    ...postgresConnection(parsed.toString()),
    options: `${POOL_SESSION_OPTIONS} ${given}`,
  };
}

/** Statements kept prepared at most, per connection (each holds its plan in the server). */
const PREPARED_LIMIT = 100;

/**
 * A pg pool whose connections send the statements named to {@link keep} as named prepared
 * statements: each connection parses such a statement once and, after a few runs, reuses its
 * generic plan instead of planning it anew. A look-up whose statement joins five tables was
 * planned in 0.15 ms and ran in a fraction of that. Statements beyond the first
 * {@link PREPARED_LIMIT} kept are sent unnamed, as every other statement is.
 */
class PreparingPool implements PostgresPool {
  private readonly names = new Map<string, string>();
  private readonly clients = new WeakMap<pg.PoolClient, PostgresPoolClient>();

  constructor(private readonly pool: pg.Pool) {}

  keep(sql: string): void {
    if (this.names.has(sql) || this.names.size >= PREPARED_LIMIT) return;
    this.names.set(sql, `agentry_${this.names.size + 1}`);
  }

  async connect(): Promise<PostgresPoolClient> {
    const client = await this.pool.connect();
    let wrapped = this.clients.get(client);
    if (wrapped === undefined) {
      wrapped = new PreparingClient(client, this.names);
      this.clients.set(client, wrapped);
    }
    return wrapped;
  }

  end(): Promise<void> {
    return this.pool.end();
  }
}

/** A pooled connection that sends the statements of `names` by their names. */
class PreparingClient implements PostgresPoolClient {
  constructor(
    private readonly client: pg.PoolClient,
    private readonly names: ReadonlyMap<string, string>,
  ) {}

  query<R>(sql: string, parameters: readonly unknown[]): Promise<PostgresQueryResult<R>>;
  query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
  query<R>(
    query: string | PostgresCursor<R>,
    parameters: readonly unknown[] = [],
  ): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    // Kysely streams through a cursor only when the dialect is given one; this one is not.
    if (typeof query !== 'string') throw new Error('streaming is not configured');
    const name = this.names.get(query);
    // Kysely hands each query an array of its own already.
    const values = parameters as unknown[];
    const result =
      name === undefined
        ? this.client.query<R & pg.QueryResultRow>(query, values)
        : this.client.query<R & pg.QueryResultRow>({ name, text: query, values });
    // pg names every command it was told of; Kysely's type names the few it reads.
    return result as Promise<PostgresQueryResult<R>>;
  }

  release(): void {
    this.client.release();
  }
}

function openPostgres(url: string, options: DatabaseOptions): DatabaseHandle {
  const pool = new PreparingPool(
    new pg.Pool({
      ...pooledConnection(url),
      max: options.poolSize ?? defaults.databasePoolSize,
      types: pgTypes as pg.CustomTypesConfig,
    }),
  );
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    dialect: 'postgres',
    keepPrepared: (sql) => pool.keep(sql),
    close: () => db.destroy(),
  };
}

export function openDatabase(url: string, options: DatabaseOptions = {}): DatabaseHandle {
  if (url.startsWith('sqlite:')) return openSqlite(url, options);
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    return openPostgres(url, options);
  }
  throw new Error(`Unsupported database URL: ${url.split(':')[0]}`);
}

/** Whether a statement failed because a row with the same unique key exists (either dialect). */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/** The database a command was pointed at does not exist, and the command does not create one. */
export class DatabaseMissingError extends Error {
  override name = 'DatabaseMissingError';
}

/**
 * Checks that the database answers before anything else uses it, so that a failure is one
 * error rather than many. SQLite: unless `create`, the file must exist (only `serve` and
 * `migrate` create a database; an admin command run from the wrong directory must not leave an
 * empty one behind). PostgreSQL: connects and runs one statement; rejects with pg's error.
 */
export async function checkDatabase(url: string, options: { create: boolean }): Promise<void> {
  if (url.startsWith('sqlite:')) {
    const path = sqlitePath(url);
    if (path === ':memory:' || options.create || existsSync(path)) return;
    throw new DatabaseMissingError(
      `there is no database at ${path}. Run this from the directory where the server runs, or point at its database with --data-dir or --database-url (AGENTRY_DATABASE_URL); "agentry serve" or "agentry migrate" creates a new one.`,
    );
  }
  const client = new pg.Client({ ...postgresConnection(url), connectionTimeoutMillis: 10_000 });
  // A connection that fails emits 'error' as well as rejecting connect().
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
  } finally {
    await client.end().catch(() => {});
  }
}

/** Another process serves the SQLite file already. */
export class DatabaseInUseError extends Error {
  override name = 'DatabaseInUseError';
}

/**
 * Claims a SQLite file for one serving process: an exclusive lock on a file beside it
 * (`agentry.db.lock`), held until this process exits, however it exits (the operating system
 * drops the lock with the process). The database itself stays open to admin commands, backups
 * and restores' own check. Throws {@link DatabaseInUseError} while another process holds it.
 */
export function claimSqliteFile(url: string): { release(): void } {
  const path = sqlitePath(url);
  if (path === ':memory:') return { release() {} };
  const lockPath = `${path}.lock`;
  mkdirSync(dirname(lockPath), { recursive: true });
  const lock = new BetterSqlite3(lockPath);
  try {
    lock.pragma('busy_timeout = 0');
    lock.pragma('locking_mode = EXCLUSIVE');
    // Held while this connection is open: the transaction is never ended.
    lock.exec('begin exclusive');
  } catch (err) {
    lock.close();
    if ((err as { code?: string }).code === 'SQLITE_BUSY') {
      throw new DatabaseInUseError(
        `another Agentry server is already serving ${path} (one serving process per SQLite file). Stop it first, or give this one another database with --data-dir; to run several servers on one database, use PostgreSQL.`,
      );
    }
    throw err;
  }
  return { release: () => lock.close() };
}
