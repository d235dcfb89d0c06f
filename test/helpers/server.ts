import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import pg from 'pg';
import { loadConfig, type Config } from '../../src/config/index.js';
import { createLogger } from '../../src/logger.js';
import { Server } from '../../src/server.js';
import type { Clock } from '../../src/infra/clock.js';
import type { DialectName } from '../../src/store/index.js';

/** The PostgreSQL server the store tests use; unset means those tests are skipped. */
export const testPgUrl = process.env.AGENTRY_TEST_PG_URL;

/** Dialects to run the store suites on: always SQLite, PostgreSQL when a test server is set. */
export const dialects: DialectName[] = testPgUrl ? ['sqlite', 'postgres'] : ['sqlite'];

/** A clock tests move by hand. */
export class ManualClock implements Clock {
  constructor(private ms = Date.now()) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/** Connection settings for `url`; without a user in it, pg would fall back to $USER. */
export function pgClientConfig(url: string): pg.ClientConfig {
  return { connectionString: url, user: new URL(url).username || 'postgres' };
}

/** Runs one statement on a connection of its own to `url`. */
export async function runOnPostgres(url: string, statement: string): Promise<void> {
  const client = new pg.Client(pgClientConfig(url));
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/**
 * An empty database: a SQLite file in a new temporary directory, or a new schema (named
 * `<prefix>_<random>`) on the PostgreSQL server at `pgUrl`, selected through `search_path`;
 * `drop` removes either.
 */
export async function createScratchDatabase(
  dialect: DialectName,
  { pgUrl, prefix }: { pgUrl: string | undefined; prefix: string },
): Promise<TestDatabase> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), `agentry-${prefix}-`));
    return {
      url: `sqlite:${join(dir, 'agentry.db')}`,
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  if (!pgUrl) throw new Error('no PostgreSQL URL to create a schema on');
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  await runOnPostgres(pgUrl, `create schema ${schema}`);
  const url = new URL(pgUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    url: url.toString(),
    drop: () => runOnPostgres(pgUrl, `drop schema ${schema} cascade`),
  };
}

/**
 * A fresh, empty database for a test: a SQLite file, or a new schema on the PostgreSQL test
 * server (`AGENTRY_TEST_PG_URL`), dropped afterwards.
 */
export async function createTestDatabase(dialect: DialectName): Promise<TestDatabase> {
  if (dialect === 'postgres' && !testPgUrl) throw new Error('AGENTRY_TEST_PG_URL is not set');
  return createScratchDatabase(dialect, { pgUrl: testPgUrl, prefix: 'test' });
}

export interface TestServer {
  /** Base URL of the listening server, e.g. http://127.0.0.1:41234 */
  url: string;
  server: Server;
  config: Config;
  dialect: DialectName;
  /** The API key of the user created on first start. */
  userKey: string;
  /** Creates another user and returns its API key. */
  addUser(name: string): Promise<string>;
  close(): Promise<void>;
}

export interface TestServerOptions {
  dialect?: DialectName;
  clock?: Clock;
  /** Config fields to change (after defaults and before validation). */
  config?: Partial<Config>;
}

/**
 * A loopback port nobody listens on right now. Servers get a concrete port rather than 0 so
 * that their public URL, and the endpoint URLs derived from it, are the real ones.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** Starts a real server on a free loopback port over a fresh database. */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const dialect = options.dialect ?? 'sqlite';
  const database = await createTestDatabase(dialect);
  const config: Config = {
    ...loadConfig(
      { databaseUrl: database.url, port: await freePort(), host: '127.0.0.1', logLevel: 'silent' },
      {},
    ),
    rateLimit: { max: 0, windowMs: 60_000 },
    ...options.config,
  };
  const server = await Server.create(config, {
    overrides: {
      logger: createLogger({ level: 'silent' }),
      ...(options.clock ? { clock: options.clock } : {}),
    },
  });
  const url = await server.start();
  if (!server.bootstrapped) throw new Error('a fresh database should bootstrap a user');
  return {
    url,
    server,
    config,
    dialect,
    userKey: server.bootstrapped.token,
    addUser: async (name) => (await server.ctx.services.users.createUser(name)).token,
    close: async () => {
      await server.close();
      await database.drop();
    },
  };
}
