import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { serializeAnswer } from '../../src/http/plugins/errors.js';
import { MAX_JSON_DEPTH } from '../../src/wire/json-depth.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import { resolveAgent, signedRegistration } from '../kit/almanac.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call, type JsonResponse } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/** A client error answered in the JSON contract: the status, a JSON body and its `detail`. */
function assertRefused(res: JsonResponse, statuses: number[], what: string): void {
  assert.ok(statuses.includes(res.status), `${what}: ${res.status} ${res.text}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/, what);
  assert.ok(
    (res.body as { detail?: unknown } | undefined)?.detail !== undefined,
    `${what}: no detail in ${res.text}`,
  );
}

const nested = (depth: number, open = '[', close = ']'): string =>
  open.repeat(depth) + close.repeat(depth);

describeOnEachDialect('hardening', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  let agent: TestIdentity;

  before(async () => {
    t = await startTestServer({ dialect, clock });
    agent = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, agent);
  });
  after(() => t.close());

  const bodyRoutes = (address: string): [string, string][] => [
    ['POST', '/v2/identity'],
    ['POST', '/v2/agents'],
    ['POST', '/v2/agents/batch'],
    ['PUT', `/v2/agents/${address}`],
    ['POST', '/v2/agents/mailbox/submit'],
    ['POST', '/v2/agents/proxy/submit'],
    ['POST', '/v2/agents/interactions'],
    ['POST', '/v1/almanac/agents'],
    ['POST', '/v1/almanac/agents/batch'],
    ['POST', `/v1/almanac/agents/${address}/status`],
    ['POST', '/v1/almanac/manifests'],
  ];

  it('refuses deeply nested JSON on every route that takes a body, with detail', async () => {
    const bodies = [
      nested(20_000),
      nested(20_000, '{"a":', '}').replace(/\}/, '1}'),
      `{"a":${nested(MAX_JSON_DEPTH)}}`,
    ];
    for (const [method, path] of bodyRoutes(agent.address)) {
      for (const rawBody of bodies) {
        const res = await call(t.url, method, path, { key: t.userKey, rawBody });
        assertRefused(res, [422], `${method} ${path} (${rawBody.length} bytes)`);
        assert.equal(res.body.detail[0].type, 'json_invalid');
      }
    }
  });

  it('answers an error whose inputs do not serialise with its items, without them', () => {
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const text = serializeAnswer({
      status: 422,
      body: {
        detail: [{ loc: ['body', 'a'], msg: 'Field required', type: 'missing', input: circular }],
      },
    });
    assert.deepEqual(JSON.parse(text), {
      detail: [{ loc: ['body', 'a'], msg: 'Field required', type: 'missing' }],
    });
  });

  it('takes JSON nested up to the limit', async () => {
    const deep = nested(MAX_JSON_DEPTH - 1);
    const res = await call(t.url, 'POST', '/v2/agents', { key: t.userKey, rawBody: `${deep}` });
    // Parsed, then refused by the schema for its shape rather than its depth.
    assertRefused(res, [422], 'at the limit');
    assert.equal(res.body.detail[0].type, 'model_attributes_type');
  });

  it('does not count brackets inside strings towards the depth', async () => {
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: agent.address, payloadJson: '{}' }),
    );
    const res = await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
      body: { ...envelope, note: `"\\${nested(5_000)}` },
    });
    assert.equal(res.status, 200, res.text);
  });

  it('answers a signed envelope with a deeply nested field or payload without a 500', async () => {
    const sender = TestIdentity.random();
    const signed = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: agent.address, payloadJson: '{}' }),
    );
    const text = JSON.stringify(signed);
    const res = await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
      rawBody: `${text.slice(0, -1)},"extra":${nested(10_000)}}`,
    });
    assertRefused(res, [422], 'nested extra field');

    const deepPayload = sender.signEnvelope(
      makeEnvelope({
        sender: sender.address,
        target: agent.address,
        payloadJson: nested(10_000, '{"a":', '}').replace(/\}/, '1}'),
      }),
    );
    const stored = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: deepPayload });
    assert.ok(stored.status < 500, stored.text);
    const listed = await call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
      authorization: agent.authorization(clock.now()),
    });
    assert.equal(listed.status, 200, listed.text);
  });

  it('refuses non-finite, fractional and out-of-range numbers in queries with 422', async () => {
    for (const value of ['Infinity', '-Infinity', 'NaN', '1e400', '1.5', '99999999999999999999']) {
      for (const [path, auth] of [
        ['/v2/agents', `Bearer ${t.userKey}`],
        [`/v2/agents/${agent.address}/mailbox`, agent.authorization(clock.now())],
      ]) {
        for (const field of ['offset', 'limit']) {
          const res = await call(t.url, 'GET', `${path}?${field}=${value}`, {
            authorization: auth,
          });
          assertRefused(res, [422], `${path}?${field}=${value}`);
          assert.deepEqual(res.body.detail[0].loc, ['query', field]);
        }
      }
    }
  });

  it('refuses non-finite and out-of-range numbers in bodies with 422', async () => {
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: agent.address, payloadJson: '{}' }),
    );
    const text = JSON.stringify(envelope);
    for (const [field, value] of [
      ['nonce', '1e400'],
      ['expires', '-1e400'],
      ['version', '1e300'],
      ['nonce', '-1'],
    ]) {
      const res = await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
        rawBody: `${text.slice(0, -1)},"${field}":${value}}`,
      });
      assertRefused(res, [422], `${field}=${value}`);
      assert.deepEqual(res.body.detail[0].loc, ['body', field]);
    }
  });

  it('stores a manifest holding a number JSON cannot keep exactly, unverified, without a 500', async () => {
    const digest = `proto:${'ab'.repeat(32)}`;
    const res = await call(t.url, 'POST', '/v1/almanac/manifests', {
      rawBody: `{"version":"1.0","metadata":{"name":"n","version":"1","digest":"${digest}"},"models":[{"digest":"d","schema":{"big":[9007199254740993123]}}],"interactions":[]}`,
    });
    assert.equal(res.status, 200, res.text);
    const stored = await call(t.url, 'GET', `/v1/almanac/manifests/protocols/${digest}`);
    assert.equal(stored.status, 200, stored.text);
  });

  it('charges nothing for HEAD on the mailbox list or a message', async () => {
    const owner = await t.addUser(`head-${dialect}`);
    const recipient = TestIdentity.random();
    await registerAgent(hostOf(t), owner, recipient);
    const sender = TestIdentity.random();
    const submitted = await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
      body: sender.signEnvelope(
        makeEnvelope({
          sender: sender.address,
          target: recipient.address,
          payloadJson: JSON.stringify({ text: 'x'.repeat(2_000) }),
        }),
      ),
    });
    assert.equal(submitted.status, 200, submitted.text);
    const transferred = async () =>
      (await call(t.url, 'GET', '/v2/agents/usage/current', { key: owner })).body
        .bytes_transferred as number;

    const head = await call(t.url, 'HEAD', `/v2/agents/${recipient.address}/mailbox`, {
      key: owner,
    });
    assert.equal(head.status, 200);
    assert.equal(head.text, '');
    assert.equal(await transferred(), 0);

    const listed = await call(t.url, 'GET', `/v2/agents/${recipient.address}/mailbox`, {
      key: owner,
    });
    assert.equal(listed.body.length, 1);
    const afterGet = await transferred();
    assert.ok(afterGet > 2_000);
    const one = await call(
      t.url,
      'HEAD',
      `/v2/agents/${recipient.address}/mailbox/${listed.body[0].uuid}`,
      { key: owner },
    );
    assert.equal(one.status, 200);
    assert.equal(await transferred(), afterGet);
    // A HEAD still says whether the caller may read.
    const stranger = await call(t.url, 'HEAD', `/v2/agents/${recipient.address}/mailbox`, {
      key: t.userKey,
    });
    assert.equal(stranger.status, 404);
  });

  it('answers a replay after delivery with 200 and stores nothing, until retention runs out', async () => {
    const owner = await t.addUser(`replay-${dialect}`);
    const recipient = TestIdentity.random();
    await registerAgent(hostOf(t), owner, recipient);
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: recipient.address, payloadJson: '{"n":1}' }),
    );
    const submit = () => call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    const list = () =>
      call(t.url, 'GET', `/v2/agents/${recipient.address}/mailbox`, { key: owner });
    const messagesCounted = async () =>
      (await call(t.url, 'GET', '/v2/agents/usage/current', { key: owner })).body
        .num_messages as number;

    assert.equal((await submit()).status, 200);
    // A retry while the first copy waits (an answer lost in transit) changes nothing.
    assert.deepEqual((await submit()).body, {});
    const [first] = (await list()).body;
    assert.ok(first);
    const deleted = await call(
      t.url,
      'DELETE',
      `/v2/agents/${recipient.address}/mailbox/${first.uuid}`,
      { key: owner },
    );
    assert.equal(deleted.status, 200, deleted.text);

    const replayed = await submit();
    assert.equal(replayed.status, 200, replayed.text);
    assert.deepEqual(replayed.body, {});
    assert.deepEqual((await list()).body, [], 'a replay is not delivered again');
    assert.equal(await messagesCounted(), 1, 'nor counted');

    // Kept for the retention period; the sweep then forgets it.
    const { mailbox } = t.server.ctx.services;
    const replays = () =>
      t.server.ctx.store.db.selectFrom('replays').select('uuid').where('uuid', '=', first.uuid);
    await mailbox.sweepExpired();
    assert.equal((await replays().execute()).length, 1);
    clock.advance(t.config.mailboxRetentionSeconds * 1000 + 1);
    await mailbox.sweepExpired();
    assert.equal((await replays().execute()).length, 0);
    assert.equal((await submit()).status, 200);
    assert.equal((await list()).body.length, 1, 'after retention it is a new message');
  });

  it('answers router-level errors as JSON with detail', async () => {
    const cases: [string, string, CallInit, number[]][] = [
      ['GET', `/v2/agents/${'a'.repeat(1_000)}`, {}, [414]],
      ['GET', '/v2/nowhere', {}, [404]],
      ['PATCH', '/v2/agents', {}, [404, 405]],
      ['GET', '/v2/agents/%zz', {}, [400]],
      ['POST', '/v2/agents', { rawBody: '{"a":' }, [422]],
      ['POST', '/v2/agents', { rawBody: 'x', headers: { 'content-type': 'text/plain' } }, [422]],
      ['POST', '/v2/agents', { rawBody: '{}', headers: { 'content-type': 'app/json;;' } }, [422]],
      ['POST', '/v2/agents', { rawBody: 'x'.repeat(300 * 1024) }, [413]],
    ];
    for (const [method, path, init, statuses] of cases) {
      const res = await call(t.url, method, path, { key: t.userKey, ...init });
      assertRefused(res, statuses, `${method} ${path}`);
    }
  });

  it('answers requests the HTTP parser refuses as JSON with detail', async () => {
    const { port } = new URL(t.url);
    for (const [request, status] of [
      ['NOT A REQUEST\r\n\r\n', 400],
      [`GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
    ] as const) {
      const answer = await rawExchange(Number(port), request);
      const [head, body] = answer.split('\r\n\r\n');
      assert.match(head ?? '', new RegExp(`^HTTP/1.1 ${status} `));
      assert.match(head ?? '', /content-type: application\/json/i);
      assert.equal(typeof JSON.parse(body ?? '').detail, 'string');
    }
  });
});

type CallInit = { rawBody?: string; headers?: Record<string, string> };

/** Writes raw bytes to the server and reads until it closes the connection. */
function rawExchange(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(request));
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (received += chunk));
    socket.on('close', () => resolve(received));
    socket.on('error', (err) => (received ? resolve(received) : reject(err)));
  });
}

describeOnEachDialect('rate limits by principal', (dialect) => {
  const max = 4;
  let t: TestServer;
  let lastClient = 10;
  /** A loopback address no other test of this suite connects from. */
  const newClient = () => `127.0.0.${++lastClient}`;

  before(async () => {
    t = await startTestServer({ dialect, config: { rateLimit: { max, windowMs: 60_000 } } });
  });
  after(() => t.close());

  async function statuses(
    count: number,
    request: (i: number) => Promise<JsonResponse>,
  ): Promise<number[]> {
    const out: number[] = [];
    for (let i = 0; i < count; i++) out.push((await request(i)).status);
    return out;
  }

  it('counts junk credentials against the client address, whatever they say', async () => {
    const from = newClient();
    const seen = await statuses(max + 3, (i) =>
      call(t.url, 'GET', '/v2/agents', { authorization: `Bearer junk-${i}`, localAddress: from }),
    );
    assert.deepEqual(seen, [401, 401, 401, 401, 429, 429, 429]);
    const other = await call(t.url, 'GET', '/v2/agents', {
      authorization: 'Bearer junk',
      localAddress: newClient(),
    });
    assert.equal(other.status, 401, 'another address has its own allowance');
  });

  it('counts one user however the key is spelled, and not another user', async () => {
    const key = await t.addUser(`spelled-${dialect}`);
    const spellings = [`Bearer ${key}`, `bearer  ${key}`, `BEARER ${key} `, `Bearer    ${key}`];
    const from = newClient();
    const seen = await statuses(max + 2, (i) =>
      call(t.url, 'GET', '/v2/agents', {
        authorization: spellings[i % spellings.length],
        localAddress: from,
      }),
    );
    assert.deepEqual(seen, [200, 200, 200, 200, 429, 429]);
    const limited = await call(t.url, 'GET', '/v2/agents', { key, localAddress: newClient() });
    assert.equal(limited.status, 429, 'the user is limited from any address');
    assert.equal(typeof limited.body.detail, 'string');
    const otherUser = await t.addUser(`other-${dialect}`);
    const fine = await call(t.url, 'GET', '/v2/agents', { key: otherUser, localAddress: from });
    assert.equal(fine.status, 200, 'another user from the same address is not limited');
  });

  it('limits unauthenticated Almanac writes per address, junk headers or not', async () => {
    const from = newClient();
    const agents = Array.from({ length: max + 2 }, () => TestIdentity.random());
    const seen = await statuses(agents.length, (i) =>
      call(t.url, 'POST', '/v1/almanac/agents', {
        body: signedRegistration(agents[i]!, { timestamp: Math.floor(Date.now() / 1000) }),
        authorization: `Bearer junk-${i}`,
        localAddress: from,
      }),
    );
    assert.deepEqual(seen, [200, 200, 200, 200, 429, 429]);
    const stored = await Promise.all(
      agents.map(async (agent) => (await resolveAgent(t.url, agent.address)).status),
    );
    assert.equal(stored.filter((status) => status === 200).length, max);
  });

  it('counts an agent by its address', async () => {
    const owner = await t.addUser(`agent-owner-${dialect}`);
    const agent = TestIdentity.random();
    await registerAgent(hostOf(t), owner, agent);
    const now = Math.floor(Date.now() / 1000);
    const from = newClient();
    const seen = await statuses(max + 1, () =>
      call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
        // A fresh attestation each time: still the same agent.
        authorization: `Agent ${agent.attestation({ validFrom: now - 10, validTo: now + 600 })}`,
        localAddress: from,
      }),
    );
    assert.deepEqual(seen, [200, 200, 200, 200, 429]);
  });
});
