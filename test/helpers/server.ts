import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import pg from 'pg';
import { loadConfig, type Config } from '../../src/config/index.js';
import { createLogger } from '../../src/logger.js';
import { Server } from '../../src/server.js';
import type { Clock } from '../../src/services/clock.js';
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

/**
 * A fresh, empty database: a SQLite file in a temporary directory, or a new schema on the
 * PostgreSQL test server (selected through `search_path`), dropped afterwards.
 */
export async function createTestDatabase(dialect: DialectName): Promise<TestDatabase> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'agentry-test-'));
    return {
      url: `sqlite:${join(dir, 'agentry.db')}`,
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  if (!testPgUrl) throw new Error('AGENTRY_TEST_PG_URL is not set');
  const schema = `test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({
    connectionString: testPgUrl,
    user: new URL(testPgUrl).username || 'postgres',
  });
  await admin.connect();
  await admin.query(`create schema ${schema}`);
  await admin.end();
  const url = new URL(testPgUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({
        connectionString: testPgUrl,
        user: new URL(testPgUrl).username || 'postgres',
      });
      await client.connect();
      await client.query(`drop schema ${schema} cascade`);
      await client.end();
    },
  };
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
      logger: createLogger('silent'),
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
