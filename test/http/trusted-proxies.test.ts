import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { Agent, fetch as undiciFetch } from 'undici';
import { ConfigError, loadConfig, type Config } from '../../src/config/index.js';
import { forwardedFor, TrustedProxies } from '../../src/infra/trusted-proxies.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import type { TestIdentity } from '../kit/uagent.js';
import { until } from '../kit/wait.js';

/** The reverse proxy of these tests: a loopback address of its own. */
const PROXY = '127.0.0.2';
const MAX = 10;
const CAP = 2;

describe('AGENTRY_TRUSTED_PROXIES', () => {
  it('reads addresses and CIDR ranges, IPv4 and IPv6, separated by commas', () => {
    const config = loadConfig(
      {},
      { AGENTRY_TRUSTED_PROXIES: ' 10.0.0.5, 172.28.0.0/24 ,fd00::/8,::1' },
    );
    assert.deepEqual(config.trustedProxies, ['10.0.0.5', '172.28.0.0/24', 'fd00::/8', '::1']);
    assert.deepEqual(loadConfig({}, {}).trustedProxies, []);
  });

  it('names the one header the proxies name clients in: X-Forwarded-For unless told', () => {
    assert.equal(loadConfig({}, {}).forwardedHeader, 'x-forwarded-for');
    assert.equal(
      loadConfig({}, { AGENTRY_FORWARDED_HEADER: 'Forwarded' }).forwardedHeader,
      'forwarded',
    );
    assert.throws(
      () => loadConfig({}, { AGENTRY_FORWARDED_HEADER: 'x-real-ip' }),
      (err: unknown) =>
        err instanceof ConfigError && /AGENTRY_FORWARDED_HEADER must be one of/.test(err.message),
    );
  });

  it('stops start-up with a sentence naming the setting and the bad entry', () => {
    for (const [raw, problem] of [
      ['proxy.internal', /"proxy\.internal" is neither an IP address nor a CIDR range/],
      ['10.0.0.0/33', /"10\.0\.0\.0\/33" has a prefix length that is not between 0 and 32/],
      ['fd00::/129', /between 0 and 128/],
      ['10.0.0.1/8/8', /neither an IP address/],
      ['10.0.0.0/x', /prefix length/],
    ] as const) {
      assert.throws(
        () => loadConfig({}, { AGENTRY_TRUSTED_PROXIES: raw }),
        (err: unknown) =>
          err instanceof ConfigError &&
          /^AGENTRY_TRUSTED_PROXIES must list/.test(err.message) &&
          problem.test(err.message),
        raw,
      );
    }
  });

  it('matches IPv4 entries whether a socket reports the address as IPv4 or IPv4-mapped IPv6', () => {
    const trusted = new TrustedProxies(['127.0.0.2', '10.1.0.0/16', '2001:db8::/32']);
    assert.ok(trusted.trusts('127.0.0.2'));
    assert.ok(trusted.trusts('::ffff:127.0.0.2'));
    assert.ok(trusted.trusts('10.1.200.3'));
    assert.ok(trusted.trusts('2001:db8::42'));
    assert.ok(!trusted.trusts('127.0.0.1'));
    assert.ok(!trusted.trusts('10.2.0.1'));
    assert.ok(!trusted.trusts('unknown'));
    assert.ok(!trusted.trusts(undefined));
    assert.ok(!new TrustedProxies([]).trusts('127.0.0.2'));
  });

  it('reads the for= nodes of an RFC 7239 Forwarded header, brackets, quotes and ports removed', () => {
    assert.deepEqual(
      forwardedFor(
        'for=192.0.2.60;proto=http;by=203.0.113.43, For="[2001:db8:cafe::17]:4711", for=unknown, for="198.51.100.1:80"',
      ),
      ['192.0.2.60', '2001:db8:cafe::17', 'unknown', '198.51.100.1'],
    );
    assert.deepEqual(forwardedFor('proto=https'), []);
  });
});

describeOnEachDialect('behind a trusted proxy', (dialect) => {
  let t: TestServer;
  const lines: Record<string, unknown>[] = [];

  before(async () => {
    const logger = pino(
      { level: 'info' },
      { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
    );
    t = await startTestServer({
      dialect,
      logger,
      config: {
        trustedProxies: [PROXY],
        rateLimit: { max: MAX, windowMs: 60_000 },
        maxConnectionsPerAddress: CAP,
        mailboxHoldSeconds: 30,
        logRequests: true,
      },
    });
  });
  after(() => t.close());

  /** The client address the request line of the answer `res` was logged with. */
  function loggedClient(res: { headers: Headers }): unknown {
    const id = res.headers.get('x-request-id');
    const line = lines.find((entry) => entry.reqId === id && entry.msg === 'request');
    assert.ok(line, `a request line for ${id}`);
    return line.client;
  }

  /** Status codes of `count` anonymous requests sent one after another. */
  async function statuses(count: number, options: Parameters<typeof call>[3]): Promise<number[]> {
    const out: number[] = [];
    for (let i = 0; i < count; i++) out.push((await call(t.url, 'GET', '/health', options)).status);
    return out;
  }

  const limited = [...Array<number>(MAX).fill(200), 429];

  /** Another server behind the proxy, rate-limited as `t` is, logging into the same lines. */
  const proxiedServer = (config: Partial<Config>): Promise<TestServer> =>
    startTestServer({
      dialect,
      logger: pino(
        { level: 'info' },
        { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
      ),
      config: {
        trustedProxies: [PROXY],
        rateLimit: { max: MAX, windowMs: 60_000 },
        logRequests: true,
        ...config,
      },
    });

  it('ignores X-Forwarded-For from a direct client: one bucket and the socket address in the log, whatever it claims', async () => {
    const spoofs = Array.from({ length: MAX + 1 }, (_, i) => `198.51.100.${i + 1}`);
    const answers = [];
    for (const spoof of spoofs) {
      answers.push(await call(t.url, 'GET', '/health', { headers: { 'x-forwarded-for': spoof } }));
    }
    assert.deepEqual(
      answers.map((res) => res.status),
      limited,
      'every spoofed address counted in the one bucket of the socket’s address',
    );
    assert.equal(loggedClient(answers[0]!), '127.0.0.1');
    assert.equal(answers[MAX]!.headers.get('retry-after') !== null, true);
    // Nor does a Forwarded header.
    const forwarded = await call(t.url, 'GET', '/health', {
      headers: { forwarded: 'for=198.51.100.99' },
    });
    assert.equal(forwarded.status, 429);
  });

  it('warns once that forwarding headers arrive from an address that is not trusted', () => {
    const warnings = lines.filter(
      (entry) =>
        typeof entry.msg === 'string' &&
        entry.msg.startsWith('requests arrive with forwarding headers'),
    );
    assert.equal(warnings.length, 1, 'one warning for every such request since start');
    assert.equal(warnings[0]!.level, 40);
    assert.equal(warnings[0]!.address, '127.0.0.1');
    assert.equal(warnings[0]!.setting, 'AGENTRY_TRUSTED_PROXIES');
    assert.match(String(warnings[0]!.msg), /add its address to AGENTRY_TRUSTED_PROXIES/);
  });

  it('gives each client forwarded by the proxy a bucket of its own, and logs its address', async () => {
    const first = { localAddress: PROXY, headers: { 'x-forwarded-for': '203.0.113.10' } };
    assert.deepEqual(await statuses(MAX + 1, first), limited);
    // Another client through the same proxy (and the same connections) is not held back.
    const second = await call(t.url, 'GET', '/health', {
      localAddress: PROXY,
      headers: { 'x-forwarded-for': '203.0.113.11' },
    });
    assert.equal(second.status, 200);
    assert.equal(loggedClient(second), '203.0.113.11');
    // A client's own X-Forwarded-For, which the proxy extends, changes nothing: the address
    // the proxy saw (the last one) is the client.
    const spoofing = await call(t.url, 'GET', '/health', {
      localAddress: PROXY,
      headers: { 'x-forwarded-for': '203.0.113.10, 203.0.113.12' },
    });
    assert.equal(spoofing.status, 200, 'not the bucket of 203.0.113.10');
    assert.equal(loggedClient(spoofing), '203.0.113.12');
    // Without forwarding headers, the proxy's own requests (its health checks) are its own,
    // and never refused: a proxy that met 429 on /ready would take the replica out of rotation.
    const own = await statuses(MAX + 2, { localAddress: PROXY });
    assert.deepEqual(own, Array<number>(MAX + 2).fill(200));
    const check = await call(t.url, 'GET', '/ready', { localAddress: PROXY });
    assert.equal(check.status, 200);
    assert.equal(loggedClient(check), PROXY);
  });

  it('takes a forwarded loopback address for a client like any other, limited as one', async () => {
    // The proxy on a loopback address forwards a client it saw on loopback: that is a client,
    // not the proxy's own request, however the addresses compare.
    const answers = await statuses(MAX + 1, {
      localAddress: PROXY,
      headers: { 'x-forwarded-for': PROXY },
    });
    assert.deepEqual(answers, limited);
  });

  describe('with a proxy that sends Forwarded while X-Forwarded-For is the header named', () => {
    let other: TestServer;
    before(async () => {
      other = await proxiedServer({});
    });
    after(() => other.close());

    it('takes the proxy’s address for the client, and warns once', async () => {
      const answers = [];
      for (let i = 0; i <= MAX; i++) {
        answers.push(
          await call(other.url, 'GET', '/health', {
            localAddress: PROXY,
            headers: { forwarded: `for=192.0.2.${i + 1}` },
          }),
        );
      }
      assert.deepEqual(
        answers.map((res) => res.status),
        limited,
        'one bucket, the proxy’s, never its own requests’ freedom',
      );
      assert.equal(loggedClient(answers[0]!), PROXY);
      const warnings = lines.filter((entry) => entry.setting === 'AGENTRY_FORWARDED_HEADER');
      assert.equal(warnings.length, 1);
      assert.match(String(warnings[0]!.msg), /set AGENTRY_FORWARDED_HEADER/);
    });
  });

  describe('with AGENTRY_FORWARDED_HEADER=forwarded', () => {
    let only: TestServer;
    before(async () => {
      only = await proxiedServer({ forwardedHeader: 'forwarded' });
    });
    after(() => only.close());

    const viaProxy = (headers: Record<string, string>) =>
      call(only.url, 'GET', '/health', { localAddress: PROXY, headers });

    it('reads the client of the Forwarded header', async () => {
      const res = await viaProxy({
        forwarded: 'for=192.0.2.60;proto=http, for="[2001:db8::7]:4711"',
      });
      assert.equal(res.status, 200);
      assert.equal(loggedClient(res), '2001:db8::7');
    });

    it('ignores an X-Forwarded-For the client wrote, however it varies', async () => {
      const answers = [];
      for (let i = 0; i <= MAX; i++) {
        answers.push(
          await viaProxy({
            'x-forwarded-for': `198.51.100.${i + 1}`,
            forwarded: 'for=192.0.2.77',
          }),
        );
      }
      assert.deepEqual(
        answers.map((res) => res.status),
        limited,
        'the Forwarded client’s bucket, whatever X-Forwarded-For says',
      );
      assert.equal(loggedClient(answers[0]!), '192.0.2.77');
      // X-Forwarded-For alone, from the proxy, names no client: the proxy's address, limited.
      const alone = [];
      for (let i = 0; i <= MAX; i++) {
        alone.push((await viaProxy({ 'x-forwarded-for': `198.51.100.${i + 50}` })).status);
      }
      assert.deepEqual(alone, limited);
    });

    it('limits a forwarded loopback client, and leaves the proxy’s own requests free', async () => {
      const loopback = [];
      for (let i = 0; i <= MAX; i++) {
        loopback.push((await viaProxy({ forwarded: 'for=127.0.0.1' })).status);
      }
      assert.deepEqual(loopback, limited);
      const own = [];
      for (let i = 0; i <= MAX + 1; i++) {
        own.push((await call(only.url, 'GET', '/ready', { localAddress: PROXY })).status);
      }
      assert.deepEqual(own, Array<number>(MAX + 2).fill(200));
    });
  });

  describe('polls and slow requests', () => {
    let agent: TestIdentity;
    before(async () => {
      agent = await newRegisteredAgent(hostOf(t), t.userKey);
    });

    const held = (): number => t.server.ctx.services.mailbox.heldPolls;

    /** A held poll of `agent`'s mailbox, through `dispatcher`, as `client` if given. */
    function poll(dispatcher: Agent, signal: AbortSignal, client?: string) {
      return undiciFetch(`${t.url}/v2/agents/${agent.address}/mailbox`, {
        headers: {
          authorization: agent.authorization(),
          ...(client && { 'x-forwarded-for': client }),
        },
        dispatcher,
        signal,
      });
    }

    it('caps requests in progress per forwarded client, not the proxy’s connections', async () => {
      const proxy = new Agent({ localAddress: PROXY });
      const stop = new AbortController();
      const before = held();
      try {
        // Twice the cap in connections from the proxy stay open: two clients, two polls each.
        const polls = [
          poll(proxy, stop.signal, '203.0.113.20'),
          poll(proxy, stop.signal, '203.0.113.20'),
          poll(proxy, stop.signal, '203.0.113.21'),
        ];
        await until(() => held() === before + 3, 'three polls to be held');
        const beyond = await poll(proxy, stop.signal, '203.0.113.20');
        assert.equal(beyond.status, 429);
        const body = (await beyond.json()) as { detail: string };
        assert.match(
          body.detail,
          /Too many requests in progress from this client address \(at most 2 at once\)/,
        );
        const other = poll(proxy, stop.signal, '203.0.113.21');
        await until(() => held() === before + 4, 'the other client’s second poll to be held');
        stop.abort();
        await Promise.allSettled([...polls, other]);
        await until(() => held() === before, 'the polls to end');
        // Once answered, they no longer count.
        const again = new AbortController();
        const next = poll(proxy, again.signal, '203.0.113.20');
        await until(() => held() === before + 1, 'a new poll to be held');
        again.abort();
        await Promise.allSettled([next]);
      } finally {
        await proxy.close();
      }
    });

    it('still closes a direct client’s connections beyond the cap', async () => {
      const direct = new Agent({ localAddress: '127.0.0.3' });
      const stop = new AbortController();
      const before = held();
      try {
        const polls = [poll(direct, stop.signal), poll(direct, stop.signal)];
        await until(() => held() === before + 2, 'two polls to be held');
        await assert.rejects(poll(direct, stop.signal), 'the third connection is closed');
        stop.abort();
        await Promise.allSettled(polls);
      } finally {
        await direct.close();
      }
    });
  });
});
