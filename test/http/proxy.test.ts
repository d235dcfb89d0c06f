import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server as HttpServer } from 'node:http';
import { hostOf, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** An agent's own HTTP endpoint on loopback, answering by path. */
async function startAgentEndpoint(): Promise<{
  url: string;
  received: Received[];
  close(): Promise<void>;
}> {
  const received: Received[] = [];
  const server: HttpServer = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      const path = request.url ?? '/';
      received.push({ path, headers: request.headers, body });
      if (path === '/slow') return; // never answers
      if (path === '/fail') {
        response.writeHead(503, { 'content-type': 'text/plain' }).end('agent is down');
      } else if (path === '/redirect') {
        response.writeHead(302, { location: '/ok' }).end();
      } else if (path === '/sync') {
        response
          .writeHead(200, { 'content-type': 'application/json' })
          .end(`{"reply" : "as the agent wrote it",  "echo":${body}}`);
      } else {
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"ignored":true}');
      }
    });
  });
  return { url: await listenOnLoopback(server), received, close: () => closeNow(server) };
}

function signedFor(target: string) {
  const sender = TestIdentity.random();
  return sender.signEnvelope(
    makeEnvelope({ sender: sender.address, target, payloadJson: '{"text":"hi"}', nonce: 1 }),
  );
}

describeOnEachDialect('proxy', (dialect) => {
  let t: TestServer;
  let endpoint: Awaited<ReturnType<typeof startAgentEndpoint>>;

  before(async () => {
    endpoint = await startAgentEndpoint();
    t = await startTestServer({
      dialect,
      config: { allowPrivateTargets: true, proxyTimeoutMs: 300, proxySyncTimeoutMs: 600 },
    });
  });
  after(async () => {
    await t.close();
    await endpoint.close();
  });

  /**
   * An agent whose URL is `path` on the endpoint. `keep: false` turns keeping off: its sender
   * hears of a failed forward (kept messages are test/http/proxy-keep.test.ts's).
   */
  async function agentAt(path: string | undefined, keep = true): Promise<TestIdentity> {
    const agent = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, agent, {
      ...(path === undefined ? {} : { redirectUrl: `${endpoint.url}${path}` }),
      listing: { keep_failed_forwards: keep },
    });
    return agent;
  }

  function forward(body: unknown, headers: Record<string, string> = {}) {
    return call(t.url, 'POST', '/v2/agents/proxy/submit', { body, headers });
  }

  function deliveriesTo(path: string): Received[] {
    return endpoint.received.filter((r) => r.path === path);
  }

  it("forwards the envelope, its own fields only, to the agent's URL and answers {}", async () => {
    const agent = await agentAt('/ok');
    const envelope = signedFor(agent.address);
    const before = deliveriesTo('/ok').length;
    const res = await forward({ ...envelope, extra: { dropped: [1] } });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, {});
    const delivered = deliveriesTo('/ok').slice(before);
    assert.equal(delivered.length, 1);
    assert.equal(delivered[0]!.headers['content-type'], 'application/json');
    assert.equal(delivered[0]!.headers['x-uagents-connection'], undefined);
    assert.deepEqual(JSON.parse(delivered[0]!.body), envelope);
  });

  it("relays the agent's reply unchanged to a synchronous sender", async () => {
    const agent = await agentAt('/sync');
    const envelope = signedFor(agent.address);
    const res = await forward(envelope, { 'x-uagents-connection': 'sync' });
    assert.equal(res.status, 200, res.text);
    assert.equal(
      res.text,
      `{"reply" : "as the agent wrote it",  "echo":${JSON.stringify(envelope)}}`,
    );
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(deliveriesTo('/sync').at(-1)!.headers['x-uagents-connection'], 'sync');
  });

  it('answers 502 with the status of an agent that fails, when keeping is off', async () => {
    const agent = await agentAt('/fail', false);
    const res = await forward(signedFor(agent.address));
    assert.equal(res.status, 502);
    assert.match(res.body.detail, /503/);
    assert.doesNotMatch(res.body.detail, /agent is down/);
  });

  it('does not follow redirects', async () => {
    const agent = await agentAt('/redirect');
    const before = deliveriesTo('/ok').length;
    const res = await forward(signedFor(agent.address));
    assert.equal(res.status, 502);
    assert.match(res.body.detail, /302/);
    assert.equal(deliveriesTo('/ok').length, before, 'the redirect target was not called');
  });

  it('answers 504 when the agent does not answer in time, when keeping is off', async () => {
    const agent = await agentAt('/slow', false);
    const started = Date.now();
    const res = await forward(signedFor(agent.address));
    assert.equal(res.status, 504);
    assert.ok(Date.now() - started < 5000);
    const sync = await forward(signedFor(agent.address), { 'x-uagents-connection': 'sync' });
    assert.equal(sync.status, 504);
  });

  it('answers 502 when the agent cannot be reached, when keeping is off', async () => {
    const closed = await startAgentEndpoint();
    await closed.close();
    const agent = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, agent, {
      redirectUrl: `${closed.url}/gone`,
      listing: { keep_failed_forwards: false },
    });
    const res = await forward(signedFor(agent.address));
    assert.equal(res.status, 502);
    assert.match(res.body.detail, /unreachable/);
  });

  it('answers 404 for a target that is not registered or has no URL', async () => {
    const mailboxOnly = await agentAt(undefined);
    for (const target of [mailboxOnly.address, TestIdentity.random().address]) {
      const res = await forward(signedFor(target));
      assert.equal(res.status, 404);
      assert.deepEqual(res.body, {
        detail: 'No registered address found matching envelope target',
      });
    }
  });

  it('checks envelopes like the mailbox before forwarding anything', async () => {
    const agent = await agentAt('/ok');
    const before = deliveriesTo('/ok').length;
    const tampered = { ...signedFor(agent.address), nonce: 2 };
    assert.equal((await forward(tampered)).status, 400);
    const expiredSender = TestIdentity.random();
    const expired = expiredSender.signEnvelope(
      makeEnvelope({
        sender: expiredSender.address,
        target: agent.address,
        payloadJson: '{}',
        expires: Math.floor(Date.now() / 1000) - 10,
      }),
    );
    assert.deepEqual((await forward(expired)).body, { detail: 'Envelope expired' });
    assert.equal((await forward({ version: 1 })).status, 422);
    const shouting = await forward(signedFor(agent.address.toUpperCase()));
    assert.equal(shouting.status, 422, shouting.text);
    assert.deepEqual(shouting.body.detail[0].loc, ['body', 'target']);
    const notBase64 = await forward({ ...signedFor(agent.address), payload: 'not base64!' });
    assert.equal(notBase64.status, 422, notBase64.text);
    const huge = { ...signedFor(agent.address), padding: 'x'.repeat(1024 * 1024) };
    assert.equal((await forward(huge)).status, 413);
    assert.equal(deliveriesTo('/ok').length, before);
  });

  it('resolves a proxy agent to this proxy at /v1/proxy/resolve, as the hosted API answers, and an envelope sent there reaches it', async () => {
    const agent = await agentAt('/resolved');
    // The hosted API reference's own example: requests.get(url), nothing more.
    const resolve = (address: string) =>
      fetch(`${t.url}/v1/proxy/resolve/${address}`, {
        headers: { accept: '*/*', 'user-agent': 'python-requests/2.32.3' },
      });
    const res = await resolve(agent.address);
    const text = await res.text();
    assert.equal(res.status, 200, text);
    const resolved = JSON.parse(text) as { url: string; weight: number };
    assert.deepEqual(resolved, { url: `${t.url}/v2/agents/proxy/submit`, weight: 1 });
    assert.ok(!text.includes(endpoint.url), 'the agent’s own URL stays with its owner');

    const envelope = signedFor(agent.address);
    const sent = await fetch(resolved.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(envelope),
    });
    assert.equal(sent.status, 200, await sent.text());
    const delivered = deliveriesTo('/resolved');
    assert.equal(delivered.length, 1);
    assert.deepEqual(JSON.parse(delivered[0]!.body), envelope);

    // An agent without a URL, one not registered here: 404; not an address: 422.
    const without = await agentAt(undefined);
    for (const address of [without.address, TestIdentity.random().address]) {
      const missing = await call(t.url, 'GET', `/v1/proxy/resolve/${address}`);
      assert.equal(missing.status, 404, missing.text);
      assert.match(missing.body.detail, /no URL for this proxy to forward to/);
    }
    const malformed = await call(t.url, 'GET', '/v1/proxy/resolve/agent1nope');
    assert.equal(malformed.status, 422, malformed.text);
    assert.deepEqual(malformed.body.detail[0].loc, ['path', 'agent_address']);
  });

  it('answers the readiness probe for agents with and without a URL', async () => {
    const [withUrl, without] = [await agentAt('/ok'), await agentAt(undefined)];
    const probe = async (method: string, address?: string) =>
      (
        await call(t.url, method, '/v2/agents/proxy/submit', {
          headers: address ? { 'x-uagents-address': address } : {},
        })
      ).headers.get('x-uagents-status');
    for (const method of ['GET', 'HEAD']) {
      assert.equal(await probe(method, withUrl.address), 'ready');
      assert.equal(await probe(method, without.address), 'not-ready');
      assert.equal(await probe(method), 'indeterminate');
    }
  });
});

describeOnEachDialect('proxy private-network guard', (dialect) => {
  let t: TestServer;
  let endpoint: Awaited<ReturnType<typeof startAgentEndpoint>>;

  before(async () => {
    endpoint = await startAgentEndpoint();
    t = await startTestServer({ dialect, config: { proxyTimeoutMs: 300 } });
  });
  after(async () => {
    await t.close();
    await endpoint.close();
  });

  const port = () => new URL(endpoint.url).port;
  for (const [what, url] of [
    ['a loopback address', () => `${endpoint.url}/ok`],
    ['the cloud metadata address', () => 'http://169.254.169.254/latest/meta-data/'],
    ['a name that resolves to loopback', () => `http://localhost:${port()}/ok`],
    ['an IPv4-mapped IPv6 loopback address', () => `http://[::ffff:127.0.0.1]:${port()}/ok`],
    ['an IPv6 loopback address', () => `http://[::1]:${port()}/ok`],
    ['an IPv4-compatible IPv6 loopback address', () => `http://[::127.0.0.1]:${port()}/ok`],
    ['a private address', () => 'http://10.0.0.1/'],
  ] as const) {
    it(`refuses by default to forward to ${what} (keeping off: the sender hears why)`, async () => {
      const agent = TestIdentity.random();
      await registerAgent(hostOf(t), t.userKey, agent, {
        redirectUrl: url(),
        listing: { keep_failed_forwards: false },
      });
      const before = endpoint.received.length;
      const res = await call(t.url, 'POST', '/v2/agents/proxy/submit', {
        body: signedFor(agent.address),
      });
      assert.equal(res.status, 400, res.text);
      assert.match(res.body.detail, /AGENTRY_ALLOW_PRIVATE_TARGETS/);
      assert.match(res.body.detail, /--allow-private-targets/);
      assert.equal(endpoint.received.length, before, 'nothing reached the endpoint');
      // The sender may be anyone: where the owner's URL points is the owner's alone.
      assert.doesNotMatch(res.text, /127\.0\.0\.1|::1|::ffff|169\.254|10\.0\.0\.1|localhost/);
      assert.doesNotMatch(res.text, /resolves/);
      // The owner's trace says why, address and all.
      const trace = await call(t.url, 'GET', `/v2/agents/${agent.address}/deliveries`, {
        key: t.userKey,
      });
      assert.equal(trace.status, 200, trace.text);
      const forwarded = trace.body.find((row: { event: string }) => row.event === 'forwarded');
      assert.match(forwarded.detail, /^private address refused: \S+ resolves to \S+;/);
    });
  }
});
