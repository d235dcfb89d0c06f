import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { webRoutes } from '../../src/http/routes/web.js';

describe('web pages: serving', () => {
  const built = mkdtempSync(join(tmpdir(), 'agentry-web-'));
  const empty = mkdtempSync(join(tmpdir(), 'agentry-web-empty-'));
  let app: FastifyInstance;
  let bare: FastifyInstance;
  let url: string;
  let bareUrl: string;

  before(async () => {
    mkdirSync(join(built, 'inspect'));
    mkdirSync(join(built, 'assets'));
    writeFileSync(join(built, 'index.html'), '<p>console</p>');
    writeFileSync(join(built, 'inspect/index.html'), '<p>inspector</p>');
    writeFileSync(join(built, 'assets/app-abc.js'), 'export {};');
    app = Fastify();
    await webRoutes(app, built);
    url = await app.listen({ port: 0, host: '127.0.0.1' });
    bare = Fastify();
    await webRoutes(bare, empty);
    bareUrl = await bare.listen({ port: 0, host: '127.0.0.1' });
  });
  after(async () => {
    await app.close();
    await bare.close();
    rmSync(built, { recursive: true, force: true });
    rmSync(empty, { recursive: true, force: true });
  });

  it('serves the console and the inspector with security headers, assets as immutable', async () => {
    const page = await fetch(`${url}/`);
    assert.equal(page.status, 200);
    assert.equal(await page.text(), '<p>console</p>');
    assert.equal(page.headers.get('x-frame-options'), 'DENY');
    assert.equal(page.headers.get('referrer-policy'), 'no-referrer');
    assert.match(
      page.headers.get('content-security-policy')!,
      /^default-src 'none'; script-src 'self';/,
    );
    const inspector = await fetch(`${url}/inspect/?uri=http%3A//localhost%3A8001&address=a`);
    assert.equal(await inspector.text(), '<p>inspector</p>');
    assert.match(
      inspector.headers.get('content-security-policy')!,
      /connect-src 'self' http:\/\/localhost:8001;/,
    );
    const asset = await fetch(`${url}/assets/app-abc.js`);
    assert.equal(asset.status, 200);
    assert.match(asset.headers.get('cache-control')!, /immutable/);
  });

  it('redirects /inspect to /inspect/ keeping the query', async () => {
    const res = await fetch(`${url}/inspect?uri=x&address=y`, { redirect: 'manual' });
    assert.equal(res.status, 301);
    assert.equal(res.headers.get('location'), '/inspect/?uri=x&address=y');
  });

  it('answers /favicon.ico with the icon the pages link, built or not', async () => {
    for (const path of [`${url}/favicon.ico`, `${bareUrl}/favicon.ico`, `${url}/favicon.svg`]) {
      const res = await fetch(path);
      assert.equal(res.status, 200, path);
      assert.equal(res.headers.get('content-type'), 'image/svg+xml');
      assert.match(await res.text(), /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    }
  });

  it('says how to build the pages when they are missing', async () => {
    for (const path of ['/', '/inspect/']) {
      const res = await fetch(`${bareUrl}${path}`);
      assert.equal(res.status, 503);
      assert.match(await res.text(), /npm run build/);
    }
  });
});
