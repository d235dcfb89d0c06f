import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { call } from '../kit/http.js';
import { spawnServer, type ServerProcess } from '../kit/process.js';
import { createTestDatabase, type TestDatabase } from '../kit/databases.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import {
  canRunRedisServer,
  OwnRedis,
  redisAnswers,
  testRedisUrl,
  uniqueRedisPrefix,
} from '../kit/redis.js';

const redisUp = await redisAnswers();
const max = 6;

/** Status codes of `count` anonymous requests sent in turn to each of `replicas`. */
async function spread(replicas: ServerProcess[], count: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) {
    statuses.push((await call(replicas[i % replicas.length]!.url, 'GET', '/health')).status);
  }
  return statuses;
}

/** Two replicas on one database, with the given extra environment. */
async function twoReplicas(
  database: TestDatabase,
  env: Record<string, string>,
): Promise<ServerProcess[]> {
  const settings = {
    AGENTRY_RATE_LIMIT_MAX: String(max),
    AGENTRY_RATE_LIMIT_WINDOW_MS: '60000',
    // Two servers on one SQLite file must be allowed to share it.
    AGENTRY_SQLITE_EXCLUSIVE: 'false',
    ...env,
  };
  const a = await spawnServer(['--database-url', database.url], settings);
  const b = await spawnServer(['--database-url', database.url], settings);
  return [a, b];
}

describeOnEachDialect('rate limits across replicas', (dialect) => {
  let database: TestDatabase;
  before(async () => {
    database = await createTestDatabase(dialect);
  });
  after(() => database.drop());

  it('one limit holds across two replicas sharing Redis', { skip: !redisUp }, async () => {
    const replicas = await twoReplicas(database, {
      AGENTRY_REDIS_URL: testRedisUrl,
      AGENTRY_REDIS_KEY_PREFIX: uniqueRedisPrefix(),
    });
    try {
      const statuses = await spread(replicas, max + 2);
      assert.deepEqual(statuses, [...Array(max).fill(200), 429, 429]);
    } finally {
      await Promise.all(replicas.map((replica) => replica.child.stop()));
    }
  });

  it('without Redis each replica counts for itself', async () => {
    const replicas = await twoReplicas(database, {});
    try {
      const statuses = await spread(replicas, 2 * max + 2);
      assert.deepEqual(statuses, [...Array(2 * max).fill(200), 429, 429]);
    } finally {
      await Promise.all(replicas.map((replica) => replica.child.stop()));
    }
  });
});

describe('rate limits when Redis fails', { skip: !canRunRedisServer }, () => {
  let database: TestDatabase;
  let redis: OwnRedis;
  let replicas: ServerProcess[] = [];
  before(async () => {
    database = await createTestDatabase('sqlite');
    redis = await OwnRedis.start();
  });
  after(async () => {
    await Promise.all(replicas.map((replica) => replica.child.stop()));
    await redis.kill();
    await database.drop();
  });

  it('falls back to per-process limits with a warning, and shares again once Redis is back', async () => {
    replicas = await twoReplicas(database, {
      AGENTRY_REDIS_URL: redis.url,
      AGENTRY_REDIS_KEY_PREFIX: uniqueRedisPrefix(),
    });
    // Shared while Redis runs: the allowance is spent across both.
    assert.deepEqual(await spread(replicas, max), Array(max).fill(200));
    assert.equal((await call(replicas[0]!.url, 'GET', '/health')).status, 429);

    await redis.kill();
    // Never refused for Redis' sake: each replica now grants its own allowance.
    const during = await spread(replicas, 2 * max + 2);
    assert.deepEqual(during, [...Array(2 * max).fill(200), 429, 429]);
    for (const replica of replicas) {
      await replica.child.waitForOutput(/"level":40[^\n]*Redis does not answer/, 5000);
    }

    await redis.restart();
    for (const replica of replicas) {
      await replica.child.waitForOutput(/Redis answers again/, 15_000);
    }
    // Counters live in Redis again (empty after its restart): one allowance for both.
    assert.deepEqual(await spread(replicas, max + 1), [...Array(max).fill(200), 429]);
  });
});
