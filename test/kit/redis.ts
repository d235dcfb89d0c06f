import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { freePort } from './ports.js';

/** The Redis the tests share (CI starts one on the default port). */
export const testRedisUrl = process.env.AGENTRY_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Whether a Redis answers PING at `url` within a second. */
export async function redisAnswers(url = testRedisUrl): Promise<boolean> {
  const client = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    retryStrategy: () => null,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/** A key prefix no other test (or parallel run) uses, so counters never collide. */
export function uniqueRedisPrefix(): string {
  return `agentry-test:${randomBytes(6).toString('hex')}:`;
}

/** Whether this machine can start a Redis server of its own (for outage tests). */
export const canRunRedisServer =
  spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;

/** Servers still running; none may outlive the tests. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** A Redis server of a test's own, on a free loopback port, that the test may stop and restart. */
export class OwnRedis {
  private child: ChildProcess | undefined;

  private constructor(readonly port: number) {}

  static async start(): Promise<OwnRedis> {
    for (let attempt = 1; ; attempt++) {
      const redis = new OwnRedis(await freePort());
      try {
        await redis.restart();
        return redis;
      } catch (err) {
        // Another process took the free port first: another one.
        await redis.kill();
        if (attempt === 3) throw err;
      }
    }
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts the server (again) on the same port and waits until it answers. */
  async restart(): Promise<void> {
    this.child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: 'ignore' },
    );
    const child = this.child;
    running.add(child);
    child.once('exit', () => running.delete(child));
    for (let i = 0; i < 100; i++) {
      if (await redisAnswers(this.url)) {
        // What answers is this server, not another process that took the port before it.
        if (child.exitCode !== null || child.signalCode !== null) break;
        return;
      }
      if (child.exitCode !== null || child.signalCode !== null) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`redis-server did not answer on port ${this.port}`);
  }

  /** Kills the server at once, as a crash would. */
  async kill(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }
}
