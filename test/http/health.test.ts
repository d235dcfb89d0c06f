import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { buildApp } from '../../src/app.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';

describe('service endpoints', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(() => t.close());

  it('answers /health and /ready', async () => {
    assert.deepEqual((await call(t.url, 'GET', '/health')).body, { status: 'ok' });
    assert.deepEqual((await call(t.url, 'GET', '/ready')).body, { status: 'ready' });
  });

  it('exposes Prometheus metrics including request latencies', async () => {
    await call(t.url, 'GET', '/health');
    const res = await fetch(`${t.url}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/plain/);
    const text = await res.text();
    assert.match(text, /agentry_http_request_duration_seconds_count\{[^}]*route="\/health"/);
    assert.match(text, /process_resident_memory_bytes/);
  });

  it('puts an x-request-id on every response and honours a given one', async () => {
    const plain = await call(t.url, 'GET', '/health');
    assert.match(plain.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
    const given = await call(t.url, 'GET', '/nowhere', {
      headers: { 'x-request-id': 'trace-123' },
    });
    assert.equal(given.headers.get('x-request-id'), 'trace-123');
  });

  it('answers unknown paths with a JSON 404', async () => {
    const res = await call(t.url, 'GET', '/v2/nothing-here');
    assert.equal(res.status, 404);
    assert.deepEqual(res.body, { detail: 'Not Found' });
  });

  it('allows any origin', async () => {
    const res = await fetch(`${t.url}/v2/agents/proxy/submit`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://inspector.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type',
      },
    });
    assert.ok(res.status < 300);
    assert.equal(res.headers.get('access-control-allow-origin'), '*');
  });

  it('refuses an OPTIONS request that is no preflight in JSON, body or not', async () => {
    for (const body of [undefined, '{"a":1}']) {
      const res = await fetch(`${t.url}/v2/agents`, {
        method: 'OPTIONS',
        ...(body === undefined ? {} : { body, headers: { 'content-type': 'application/json' } }),
      });
      assert.equal(res.status, 400);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
      const answer = (await res.json()) as { detail: string };
      assert.match(answer.detail, /Origin and Access-Control-Request-Method/);
    }
  });

  it('answers the proxy readiness probe on GET and HEAD', async () => {
    const get = await call(t.url, 'GET', '/v2/agents/proxy/submit');
    assert.equal(get.status, 200);
    assert.deepEqual(get.body, {});
    const head = await fetch(`${t.url}/v2/agents/proxy/submit`, { method: 'HEAD' });
    assert.equal(head.status, 200);
  });

  it('hides internals of a failure and names the request id instead', async () => {
    const app = await buildApp(t.server.ctx);
    app.get('/explode', async () => {
      throw new Error('secret database password in message');
    });
    const res = await app.inject({ method: 'GET', url: '/explode' });
    assert.equal(res.statusCode, 500);
    const body = res.json();
    assert.doesNotMatch(body.detail, /secret/);
    assert.ok(body.detail.includes(res.headers['x-request-id'] as string));
    await app.close();
  });
});

describe('rate limits', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ config: { rateLimit: { max: 3, windowMs: 60_000 } } });
  });
  after(() => t.close());

  it('answers 429 with Retry-After once a client exceeds its allowance', async () => {
    const statuses: number[] = [];
    let last;
    for (let i = 0; i < 4; i++) {
      last = await call(t.url, 'GET', '/health');
      statuses.push(last.status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 429]);
    assert.ok(Number(last!.headers.get('retry-after')) >= 1);
    assert.equal(typeof last!.body.detail, 'string');
  });
});
