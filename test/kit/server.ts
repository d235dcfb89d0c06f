import { loadConfig, type Config } from '../../src/config/index.js';
import { createLogger, type Logger } from '../../src/logger.js';
import { Server } from '../../src/server.js';
import type { Clock } from '../../src/infra/clock.js';
import type { DialectName } from '../../src/store/index.js';
import { createTestDatabase } from './databases.js';
import { freePort } from './ports.js';

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
  /**
   * Another server over the database of this one, as a replica: its user key is this one's,
   * and the database goes when this one closes (`dialect` is this one's).
   */
  replicaOf?: TestServer;
  /** Where the server logs; silent unless given. */
  logger?: Logger;
}

/** Writes the presence `t` has seen so far (it writes it once a second by itself). */
export async function flushPresence(t: TestServer): Promise<void> {
  await t.server.ctx.services.activity.flush();
}

/**
 * Starts a real server on a free loopback port over a fresh database (or the database of
 * `options.replicaOf`).
 */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startTestServerOnce(options);
    } catch (err) {
      // The free port was taken (by another test file's process) before the server listened
      // on it: another port, over a fresh database.
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt === 3) throw err;
    }
  }
}

async function startTestServerOnce(options: TestServerOptions): Promise<TestServer> {
  const { replicaOf } = options;
  const dialect = replicaOf?.dialect ?? options.dialect ?? 'sqlite';
  const database = replicaOf
    ? { url: replicaOf.config.databaseUrl, drop: async () => {} }
    : await createTestDatabase(dialect);
  const config: Config = {
    ...loadConfig(
      { databaseUrl: database.url, port: await freePort(), host: '127.0.0.1', logLevel: 'silent' },
      {},
    ),
    rateLimit: { max: 0, windowMs: 60_000 },
    // Polls of an empty mailbox answer at once unless a test asks for held polls.
    mailboxHoldSeconds: 0,
    ...options.config,
  };
  let server: Server | undefined;
  let url: string;
  try {
    server = await Server.create(config, {
      overrides: {
        logger: options.logger ?? createLogger({ level: 'silent' }),
        ...(options.clock ? { clock: options.clock } : {}),
      },
    });
    url = await server.start();
  } catch (err) {
    await server?.close();
    await database.drop();
    throw err;
  }
  const started = server;
  const userKey = replicaOf?.userKey ?? started.bootstrapped?.token;
  if (!userKey) throw new Error('a fresh database should bootstrap a user');
  return {
    url,
    server: started,
    config,
    dialect,
    userKey,
    addUser: async (name) => (await started.ctx.services.users.createUser(name)).token,
    close: async () => {
      await started.close();
      await database.drop();
    },
  };
}
