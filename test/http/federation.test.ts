import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { defaults, type FederationPeer } from '../../src/config/index.js';
import type { DialectName } from '../../src/store/index.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import {
  registerInAlmanac,
  resolveAgent,
  signedRegistration,
  unixSeconds,
} from '../kit/almanac.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';
import { freePort } from '../kit/ports.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/** One sealing key for every instance: PostgreSQL keeps none by itself. */
const SEALING_KEY = randomBytes(32).toString('hex');
const TIMEOUT_MS = 500;
const CACHE_SECONDS = 5;

interface Instance extends TestServer {
  /** The instance's address, from its GET /v2/federation. */
  address: string;
}

async function startInstance(
  dialect: DialectName,
  options: {
    clock?: ManualClock;
    peers?: FederationPeer[];
    upstreams?: string[];
    port?: number;
  } = {},
): Promise<Instance> {
  const t = await startTestServer({
    dialect,
    ...(options.clock ? { clock: options.clock } : {}),
    config: {
      ...(options.port === undefined
        ? {}
        : { port: options.port, publicUrl: `http://127.0.0.1:${options.port}` }),
      hosting: { ...defaults.hosting, key: SEALING_KEY },
      federation: {
        peers: options.peers ?? [],
        upstreams: options.upstreams ?? [],
        timeoutMs: TIMEOUT_MS,
        cacheSeconds: CACHE_SECONDS,
      },
    },
  });
  const status = await call(t.url, 'GET', '/v2/federation');
  assert.equal(status.status, 200, status.text);
  return Object.assign(t, { address: status.body.address as string });
}

/** An agent of `t`'s user, with a mailbox there and an Almanac registration pointing at it. */
async function agentOn(t: TestServer, timestamp = unixSeconds(Date.now())) {
  const agent = TestIdentity.random();
  await registerAgent(hostOf(t), t.userKey, agent);
  const registration = await registerInAlmanac(t.url, agent, {
    timestamp,
    endpoints: [{ url: `${t.url}/v2/agents/mailbox/submit`, weight: 1 }],
  });
  return { agent, registration };
}

async function publish(t: TestServer, address: string, published: boolean) {
  const res = await call(t.url, 'PUT', `/v2/agents/${address}/federation`, {
    key: t.userKey,
    body: { published },
  });
  assert.equal(res.status, 200, res.text);
  return res.body;
}

type Handler = (request: IncomingMessage, body: string, response: ServerResponse) => void;

/** A stand-in for an Almanac service or a peer outside this machine: answers as told, counts. */
async function startFake() {
  let handler: Handler = (_request, _body, response) =>
    response.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"no"}');
  const received: {
    method: string;
    url: string;
    headers: IncomingMessage['headers'];
    body: string;
  }[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({ method: request.method!, url: request.url!, headers: request.headers, body });
      handler(request, body, response);
    });
  });
  const url = await listenOnLoopback(server);
  return {
    url,
    received,
    answer(next: Handler) {
      handler = next;
    },
    close: () => closeNow(server),
  };
}

const json = (response: ServerResponse, status: number, body: unknown) =>
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));

/** An Almanac record of `identity` as GET /v1/almanac/agents answers it. */
function almanacRecord(identity: TestIdentity, endpoint: string) {
  return {
    address: identity.address,
    status: 'active',
    type: 'uagent',
    endpoints: [{ url: endpoint, weight: 1 }],
    protocols: [],
    metadata: null,
    domain_name: null,
    expiry: new Date(Date.now() + 3600_000).toISOString(),
  };
}

describeOnEachDialect('federation', (dialect) => {
  describe('between two Agentry instances', () => {
    const clockA = new ManualClock();
    let a: Instance;
    let b: Instance;
    /** A peer of B's whose key the test holds, to ask B as A does. */
    const tester = TestIdentity.random();

    before(async () => {
      b = await startInstance(dialect);
      a = await startInstance(dialect, {
        clock: clockA,
        peers: [{ url: b.url, address: b.address }],
      });
      // B trusts A from now on: the list is read at each request, as after a restart with it.
      b.config.federation.peers.push(
        { url: a.url, address: a.address },
        { url: 'http://127.0.0.1:1', address: tester.address },
      );
    });
    after(async () => {
      await a?.close();
      await b?.close();
    });

    it('answers 404 for an agent of B that is not published, saying what B said', async () => {
      const { agent } = await agentOn(b);
      const res = await resolveAgent(a.url, agent.address);
      assert.equal(res.status, 404, res.text);
      assert.match(res.body.detail, new RegExp(`${b.url} does not know it`));
    });

    it("resolves an agent B publishes to B's endpoints, says its home, keeps it until its cache expires, then follows B", async () => {
      const { agent } = await agentOn(b);
      const setting = await publish(b, agent.address, true);
      assert.equal(setting.published, true);
      assert.deepEqual(setting.upstreams, [a.url, 'http://127.0.0.1:1']);

      const found = await resolveAgent(a.url, agent.address);
      assert.equal(found.status, 200, found.text);
      assert.deepEqual(found.body.endpoints, [
        { url: `${b.url}/v2/agents/mailbox/submit`, weight: 1 },
      ]);
      assert.equal(found.body.type, 'mailbox');
      assert.equal(found.headers.get('x-agentry-home'), b.url);

      // Unpublished on B: B refuses it at once, A answers from its cache until it expires.
      const path = `/v2/federation/agents/${agent.address}`;
      const served = await call(b.url, 'GET', path, { authorization: tester.authorization() });
      assert.equal(served.status, 200, served.text);
      assert.equal(served.body.home, b.url);
      await publish(b, agent.address, false);
      const asked = await call(b.url, 'GET', path, { authorization: tester.authorization() });
      assert.equal(asked.status, 404, asked.text);
      assert.match(asked.body.detail, /is not published here/);
      const cached = await resolveAgent(a.url, agent.address);
      assert.equal(cached.status, 200, cached.text);
      const status = await call(a.url, 'GET', '/v2/federation/health', { key: a.userKey });
      assert.deepEqual(
        status.body.remote_lookups
          .filter((lookup: { address: string }) => lookup.address === agent.address)
          .map((lookup: { cached: boolean; home: string }) => [lookup.cached, lookup.home]),
        [
          [true, b.url],
          [false, b.url],
        ],
      );
      clockA.advance(CACHE_SECONDS * 1000 + 1000);
      const gone = await resolveAgent(a.url, agent.address);
      assert.equal(gone.status, 404, gone.text);
    });

    it('names the home of a sender resolved from afar on the submitted row of the trace', async () => {
      const { agent: remote } = await agentOn(b);
      await publish(b, remote.address, true);
      const { agent: local } = await agentOn(a, unixSeconds(clockA.now()));
      assert.equal((await resolveAgent(a.url, remote.address)).status, 200);
      const envelope = remote.signEnvelope(
        makeEnvelope({ sender: remote.address, target: local.address, payloadJson: '{}' }),
      );
      const submitted = await call(a.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
      assert.equal(submitted.status, 200, submitted.text);
      const trace = await call(a.url, 'GET', `/v2/agents/${local.address}/deliveries`, {
        key: a.userKey,
      });
      assert.equal(trace.status, 200, trace.text);
      const row = trace.body.find((event: { event: string }) => event.event === 'submitted');
      assert.equal(row?.detail, `from ${b.url}`, trace.text);
    });

    it('gives nothing to a caller that is not a peer', async () => {
      const { agent } = await agentOn(b);
      await publish(b, agent.address, true);
      const stranger = TestIdentity.random();
      const path = `/v2/federation/agents/${agent.address}`;
      const refused = await call(b.url, 'GET', path, { authorization: stranger.authorization() });
      assert.equal(refused.status, 404, refused.text);
      assert.match(refused.body.detail, /not a peer of this Agentry/);
      assert.ok(!refused.text.includes('signature'), refused.text);
      for (const options of [{}, { key: b.userKey }]) {
        const res = await call(b.url, 'GET', path, options);
        assert.equal(res.status, 401, res.text);
      }
      const search = await call(b.url, 'POST', '/v2/federation/search', {
        authorization: stranger.authorization(),
        body: { search_text: 'agent' },
      });
      assert.equal(search.status, 404, search.text);
    });

    it("searches the peers' published listings, each marked with its home", async () => {
      const { agent } = await agentOn(b);
      await publish(b, agent.address, true);
      const { agent: hidden } = await agentOn(b);
      const res = await call(a.url, 'GET', `/v2/federation/search?q=agent`, { key: a.userKey });
      assert.equal(res.status, 200, res.text);
      const addresses = res.body.agents.map((listing: { address: string }) => listing.address);
      assert.ok(addresses.includes(agent.address), res.text);
      assert.ok(!addresses.includes(hidden.address), res.text);
      assert.ok(res.body.agents.every((listing: { home: string }) => listing.home === b.url));
    });

    it('shows the instance, its peers and their health', async () => {
      // Anyone learns who the instance is; its peers, their health and its look-ups are for
      // its users (and itself), not for another agent.
      const identity = await call(a.url, 'GET', '/v2/federation');
      assert.deepEqual(Object.keys(identity.body).sort(), ['address', 'published_agents', 'url']);
      assert.equal((await call(a.url, 'GET', '/v2/federation/health')).status, 401);
      const stranger = TestIdentity.random();
      const foreign = await call(a.url, 'GET', '/v2/federation/health', {
        authorization: stranger.authorization(),
      });
      assert.equal(foreign.status, 404, foreign.text);
      const status = await call(a.url, 'GET', '/v2/federation/health', { key: a.userKey });
      assert.equal(status.status, 200, status.text);
      assert.match(status.body.address, /^agent1/);
      assert.equal(status.body.url, a.url);
      assert.deepEqual(
        status.body.peers.map((peer: { url: string; address: string; healthy: boolean }) => [
          peer.url,
          peer.address,
          peer.healthy,
        ]),
        [[b.url, b.address, true]],
      );
    });
  });

  describe('with plain upstreams that misbehave', () => {
    let fake: Awaited<ReturnType<typeof startFake>>;
    let downUrl: string;
    let a: Instance;

    before(async () => {
      fake = await startFake();
      downUrl = `http://127.0.0.1:${await freePort()}`;
      a = await startInstance(dialect, { upstreams: [fake.url] });
    });
    after(async () => {
      await a?.close();
      await fake?.close();
    });

    const cases: [string, (asked: TestIdentity) => Handler, RegExp][] = [
      [
        'garbage',
        () => (_request, _body, response) => response.writeHead(200).end('<html>not json'),
        /answered something that is not an Almanac record/,
      ],
      [
        'a record for another address',
        () => (_request, _body, response) =>
          json(response, 200, almanacRecord(TestIdentity.random(), 'http://127.0.0.1:1/submit')),
        /a record for another address/,
      ],
      [
        'an answer slower than the timeout',
        (asked) => (_request, _body, response) => {
          setTimeout(
            () => json(response, 200, almanacRecord(asked, 'http://127.0.0.1:1/submit')),
            TIMEOUT_MS * 4,
          );
        },
        new RegExp(`did not answer within ${TIMEOUT_MS} ms`),
      ],
    ];
    for (const [name, handler, reason] of cases) {
      it(`answers 404 with the reason, within the bound, for ${name}`, async () => {
        const asked = TestIdentity.random();
        fake.answer(handler(asked));
        const started = performance.now();
        const res = await resolveAgent(a.url, asked.address);
        assert.ok(performance.now() - started < TIMEOUT_MS * 3, 'a bounded wait');
        assert.equal(res.status, 404, res.text);
        assert.match(res.body.detail, reason);
        const status = await call(a.url, 'GET', '/v2/federation/health', { key: a.userKey });
        assert.equal(status.body.upstreams[0].healthy, false);
        assert.match(status.body.upstreams[0].last_error, reason);
        // Nothing was kept: a good answer is taken at the next look-up.
        fake.answer((_request, _body, response) =>
          json(response, 200, almanacRecord(asked, 'http://127.0.0.1:1/submit')),
        );
        const found = await resolveAgent(a.url, asked.address);
        assert.equal(found.status, 200, found.text);
        assert.equal(found.headers.get('x-agentry-home'), fake.url);
      });
    }

    it('answers 404 saying so for an upstream that is down', async () => {
      const down = await startInstance(dialect, { upstreams: [downUrl] });
      try {
        const res = await resolveAgent(down.url, TestIdentity.random().address);
        assert.equal(res.status, 404, res.text);
        assert.match(res.body.detail, /could not be reached/);
      } finally {
        await down.close();
      }
    });
  });

  describe('with peers that answer signed records', () => {
    let first: Awaited<ReturnType<typeof startFake>>;
    let second: Awaited<ReturnType<typeof startFake>>;
    let a: Instance;

    before(async () => {
      first = await startFake();
      second = await startFake();
      a = await startInstance(dialect, {
        peers: [
          { url: first.url, address: TestIdentity.random().address },
          { url: second.url, address: TestIdentity.random().address },
        ],
      });
    });
    after(async () => {
      await a?.close();
      await first?.close();
      await second?.close();
    });

    const peerRecord = (attestation: unknown, home: string) => ({
      attestation,
      expires_at: new Date(Date.now() + 3600_000).toISOString(),
      home,
    });

    it('refuses a record whose signature does not check out, and keeps nothing of it', async () => {
      const asked = TestIdentity.random();
      const forged = signedRegistration(asked, {
        timestamp: unixSeconds(Date.now()),
        endpoints: [{ url: 'http://127.0.0.1:1/forged', weight: 1 }],
        signedBy: TestIdentity.random(),
      });
      first.answer((_request, _body, response) =>
        json(response, 200, peerRecord(forged, first.url)),
      );
      const res = await resolveAgent(a.url, asked.address);
      assert.equal(res.status, 404, res.text);
      assert.match(res.body.detail, /does not check out/);
      const genuine = signedRegistration(asked, {
        timestamp: unixSeconds(Date.now()),
        endpoints: [{ url: 'http://127.0.0.1:1/genuine', weight: 1 }],
      });
      first.answer((_request, _body, response) =>
        json(response, 200, peerRecord(genuine, first.url)),
      );
      const found = await resolveAgent(a.url, asked.address);
      assert.equal(found.status, 200, found.text);
      assert.equal(found.body.endpoints[0].url, 'http://127.0.0.1:1/genuine');
    });

    it('takes, of two peers publishing one address, the registration signed last', async () => {
      const asked = TestIdentity.random();
      const now = unixSeconds(Date.now());
      const older = signedRegistration(asked, {
        timestamp: now - 60,
        endpoints: [{ url: 'http://127.0.0.1:1/older', weight: 1 }],
      });
      const newer = signedRegistration(asked, {
        timestamp: now,
        endpoints: [{ url: 'http://127.0.0.1:1/newer', weight: 1 }],
      });
      first.answer((_request, _body, response) =>
        json(response, 200, peerRecord(newer, first.url)),
      );
      second.answer((_request, _body, response) =>
        json(response, 200, peerRecord(older, second.url)),
      );
      const found = await resolveAgent(a.url, asked.address);
      assert.equal(found.status, 200, found.text);
      assert.equal(found.body.endpoints[0].url, 'http://127.0.0.1:1/newer');
      assert.equal(found.headers.get('x-agentry-home'), first.url);
      // The peers were asked with A's signature.
      const request = first.received.at(-1)!;
      assert.equal(request.url, `/v2/federation/agents/${asked.address}`);
      assert.match(request.headers.authorization ?? '', /^Agent attr:/);

      // Both peers gone: the answer kept is given until its cache entry expires.
      const drop: Handler = (_request, _body, response) => response.socket?.destroy();
      first.answer(drop);
      second.answer(drop);
      const asks = first.received.length;
      const cached = await resolveAgent(a.url, asked.address);
      assert.equal(cached.status, 200, cached.text);
      assert.equal(cached.body.endpoints[0].url, 'http://127.0.0.1:1/newer');
      assert.equal(first.received.length, asks, 'answered from the cache, nobody asked');
    });
  });

  describe('between two instances that name each other', () => {
    let one: Instance;
    let two: Instance;

    before(async () => {
      const [portOne, portTwo] = [await freePort(), await freePort()];
      const urlOne = `http://127.0.0.1:${portOne}`;
      const urlTwo = `http://127.0.0.1:${portTwo}`;
      one = await startInstance(dialect, { port: portOne, upstreams: [urlTwo] });
      two = await startInstance(dialect, {
        port: portTwo,
        upstreams: [urlOne],
        peers: [{ url: urlOne, address: one.address }],
      });
      one.config.federation.peers.push({ url: urlTwo, address: two.address });
    });
    after(async () => {
      await one?.close();
      await two?.close();
    });

    it('answers 404 at once for an address neither knows: no look-up is passed on', async () => {
      const started = performance.now();
      const res = await resolveAgent(one.url, TestIdentity.random().address);
      assert.ok(performance.now() - started < TIMEOUT_MS, 'no wait for a loop to time out');
      assert.equal(res.status, 404, res.text);
      // Each of two's ways answered a clean "no": neither passed the look-up back.
      assert.equal(res.body.detail.match(/does not know it/g)?.length, 2, res.body.detail);
    });
  });

  describe('publishing to a plain upstream', () => {
    let fake: Awaited<ReturnType<typeof startFake>>;
    let b: Instance;
    let third: Instance;

    before(async () => {
      fake = await startFake();
      fake.answer((_request, _body, response) => json(response, 200, {}));
      b = await startInstance(dialect, { upstreams: [fake.url] });
      third = await startInstance(dialect);
    });
    after(async () => {
      await b?.close();
      await third?.close();
      await fake?.close();
    });

    it('relays the registration unchanged, signed by the agent, and again when it renews', async () => {
      const timestamp = unixSeconds(Date.now()) - 10;
      const { agent, registration } = await agentOn(b, timestamp);
      const posts = () => fake.received.filter((request) => request.method === 'POST');
      assert.equal(posts().length, 0);
      await publish(b, agent.address, true);
      assert.equal(posts().length, 1);
      assert.equal(posts()[0]!.url, '/v1/almanac/agents');
      const relayed = JSON.parse(posts()[0]!.body);
      assert.deepEqual(relayed, registration);
      // Another Almanac takes it: the agent's signature holds.
      const accepted = await call(third.url, 'POST', '/v1/almanac/agents', { body: relayed });
      assert.equal(accepted.status, 200, accepted.text);

      const renewed = await registerInAlmanac(b.url, agent, {
        timestamp: timestamp + 5,
        endpoints: [{ url: `${b.url}/v2/agents/mailbox/submit`, weight: 1 }],
      });
      for (let waited = 0; posts().length < 2 && waited < 2000; waited += 20) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.equal(posts().length, 2);
      assert.deepEqual(JSON.parse(posts()[1]!.body), renewed);
    });

    it('relays nothing of an agent that is not published, and answers only its owner', async () => {
      const { agent } = await agentOn(b);
      const before = fake.received.length;
      const setting = await call(b.url, 'GET', `/v2/agents/${agent.address}/federation`, {
        key: b.userKey,
      });
      assert.equal(setting.status, 200, setting.text);
      assert.deepEqual(setting.body, {
        address: agent.address,
        published: false,
        published_at: null,
        upstreams: [],
      });
      const other = await b.addUser('mallory');
      const refused = await call(b.url, 'PUT', `/v2/agents/${agent.address}/federation`, {
        key: other,
        body: { published: true },
      });
      assert.equal(refused.status, 404, refused.text);
      assert.equal(fake.received.length, before);
    });
  });
});
