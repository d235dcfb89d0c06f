import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { postgresConnection } from '../../src/store/database.js';
import { migrations } from '../../src/store/migrations/index.js';
import { registerAgent } from '../kit/agents.js';
import { registerInAlmanac, resolveAgent, unixSeconds } from '../kit/almanac.js';
import { createTestDatabase, testPgUrl, type TestDatabase } from '../kit/databases.js';
import { call } from '../kit/http.js';
import { runAgentry, spawnServer, type ServerProcess } from '../kit/process.js';
import { redisAnswers, testRedisUrl, uniqueRedisPrefix } from '../kit/redis.js';
import { mailboxSignatures } from '../kit/submit-load.js';
import { openStream } from '../kit/sse.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/**
 * Two replicas, as deployed: two server processes on one PostgreSQL database, sharing rate
 * limits through Redis. Whatever one replica did, the other sees.
 */

const redisUp = await redisAnswers();
const skip = !testPgUrl
  ? 'AGENTRY_TEST_PG_URL is not set'
  : !redisUp
    ? `no Redis answers at ${testRedisUrl}`
    : false;
const RATE_LIMIT = 40;

describe('two replicas on one PostgreSQL database', { skip }, () => {
  let database: TestDatabase;
  let a: ServerProcess;
  let b: ServerProcess;
  let key: string;

  before(async () => {
    database = await createTestDatabase('postgres');
    const env = {
      AGENTRY_REDIS_URL: testRedisUrl,
      AGENTRY_REDIS_KEY_PREFIX: uniqueRedisPrefix(),
      AGENTRY_RATE_LIMIT_MAX: String(RATE_LIMIT),
      AGENTRY_RATE_LIMIT_WINDOW_MS: '600000',
      AGENTRY_DRAIN_SECONDS: '0',
    };
    // Both at once, on an empty database.
    [a, b] = await Promise.all([
      spawnServer(['--database-url', database.url], env),
      spawnServer(['--database-url', database.url], env),
    ]);
    const keys = [a.bootstrapKey, b.bootstrapKey].filter((k) => k !== undefined);
    assert.equal(keys.length, 1, 'exactly one replica bootstraps the first user');
    key = keys[0]!;
  });
  after(async () => {
    await Promise.all([a?.child.stop(), b?.child.stop()]);
    await database?.drop();
  });

  it('start at once on an empty database and migrate it once', async () => {
    const client = new pg.Client(postgresConnection(database.url));
    await client.connect();
    try {
      const { rows } = await client.query<{ name: string }>(
        'select name from kysely_migration order by name',
      );
      assert.deepEqual(
        rows.map((row) => row.name),
        Object.keys(migrations).sort(),
      );
    } finally {
      await client.end();
    }
    const migrated = [a, b].filter((r) => /"msg":"database migrated"/.test(r.child.stdout()));
    assert.equal(migrated.length, 1, 'one replica applied the migrations, the other found none');
  });

  it('a challenge issued by A is proven on B, and cannot be proven twice on either', async () => {
    const agent = TestIdentity.random();
    const issued = await call(a.url, 'GET', `/v2/identity/${agent.address}/challenge`, { key });
    assert.equal(issued.status, 200, issued.text);
    const proof = {
      address: agent.address,
      challenge: issued.body.challenge,
      challenge_response: agent.signChallenge(issued.body.challenge),
    };
    const proven = await call(b.url, 'POST', '/v2/identity', { key, body: proof });
    assert.equal(proven.status, 200, proven.text);
    for (const replica of [a, b]) {
      const again = await call(replica.url, 'POST', '/v2/identity', { key, body: proof });
      assert.equal(again.status, 400, again.text);
    }
  });

  it('a registration on A is read on B', async () => {
    const agent = TestIdentity.random();
    await registerAgent(a, key, agent);
    const read = await call(b.url, 'GET', `/v2/agents/${agent.address}`, { key });
    assert.equal(read.status, 200, read.text);
    assert.equal(read.body.address, agent.address);
  });

  it('a submit on B is polled on A', async () => {
    const recipient = TestIdentity.random();
    await registerAgent(a, key, recipient);
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: recipient.address, payloadJson: '{}' }),
    );
    const submitted = await call(b.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(submitted.status, 200, submitted.text);
    assert.deepEqual([...(await mailboxSignatures(a.url, recipient))], [envelope.signature]);
  });

  it('a submit on B wakes a poll held on A', async () => {
    const recipient = TestIdentity.random();
    await registerAgent(a, key, recipient);
    const now = unixSeconds(Date.now());
    const authorization = `Agent ${recipient.attestation({ validFrom: now - 10, validTo: now + 1000 })}`;
    // The mailbox is empty: A holds this poll (20 s by default) until a message is committed.
    const held = call(a.url, 'GET', `/v2/agents/${recipient.address}/mailbox`, { authorization });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: recipient.address, payloadJson: '{}' }),
    );
    const submittedAt = performance.now();
    const submitted = await call(b.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(submitted.status, 200, submitted.text);
    const polled = await held;
    const waited = performance.now() - submittedAt;
    assert.equal(polled.status, 200, polled.text);
    assert.deepEqual(
      polled.body.map((item: { envelope: { signature: string } }) => item.envelope.signature),
      [envelope.signature],
    );
    assert.ok(waited < 5000, `the held poll answered ${Math.round(waited)} ms after the submit`);
  });

  it("what happens on B reaches an activity stream open on A: a message, and an agent's error", async () => {
    const recipient = TestIdentity.random();
    await registerAgent(a, key, recipient);
    const stream = await openStream(`${a.url}/v2/agents/${recipient.address}/activity/stream`, {
      key,
    });
    try {
      assert.equal(stream.status, 200);
      const sender = TestIdentity.random();
      const envelope = sender.signEnvelope(
        makeEnvelope({ sender: sender.address, target: recipient.address, payloadJson: '{}' }),
      );
      const submitted = await call(b.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
      assert.equal(submitted.status, 200, submitted.text);
      const stored = JSON.parse((await stream.next(3000)).data) as { kind: string; peer: string };
      assert.deepEqual([stored.kind, stored.peer], ['message.stored', sender.address]);
      // Not a message: announced to the other replica's streams all the same.
      const now = unixSeconds(Date.now());
      const reported = await call(b.url, 'POST', '/v1/events', {
        authorization: `Agent ${recipient.attestation({ validFrom: now - 10, validTo: now + 100 })}`,
        body: {
          events: [
            {
              category: 'user',
              kind: 'error',
              timestamp: new Date().toISOString(),
              message: 'handler failed on B',
            },
          ],
        },
      });
      assert.equal(reported.status, 200, reported.text);
      const kinds: string[] = [];
      while (!kinds.includes('event.error')) {
        kinds.push((JSON.parse((await stream.next(3000)).data) as { kind: string }).kind);
      }
    } finally {
      stream.close();
    }
  });

  it('an Almanac registration on A resolves on B', async () => {
    const agent = TestIdentity.random();
    const endpoint = 'http://127.0.0.1:8001/submit';
    await registerInAlmanac(a.url, agent, {
      timestamp: unixSeconds(Date.now()),
      endpoints: [{ url: endpoint, weight: 1 }],
    });
    const resolved = await resolveAgent(b.url, agent.address);
    assert.equal(resolved.status, 200, resolved.text);
    assert.deepEqual(
      resolved.body.endpoints.map((e: { url: string }) => e.url),
      [endpoint],
    );
  });

  it("one user's requests spread over both replicas meet one rate limit", async () => {
    const created = runAgentry(['users', 'add', 'limited', '--database-url', database.url]);
    assert.equal(created.code, 0, created.stderr);
    const userKey = created.stdout.trim().split('\n').at(-1)!;
    const statuses: number[] = [];
    for (let i = 0; i < RATE_LIMIT + 4; i++) {
      const replica = i % 2 === 0 ? a : b;
      statuses.push((await call(replica.url, 'GET', '/v2/agents', { key: userKey })).status);
    }
    assert.deepEqual(statuses, [...Array(RATE_LIMIT).fill(200), 429, 429, 429, 429]);
  });
});
