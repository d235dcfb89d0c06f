import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';

const openapiFixture = new URL('../fixtures/openapi.json', import.meta.url);

describe('OpenAPI document', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(() => t.close());

  it('serves an OpenAPI 3.1 document and a docs page', async () => {
    const spec = await call(t.url, 'GET', '/openapi.json');
    assert.equal(spec.status, 200);
    assert.equal(spec.body.openapi, '3.1.0');
    assert.ok(spec.body.paths['/v2/identity']);
    const docs = await fetch(`${t.url}/docs/`);
    assert.equal(docs.status, 200);
    assert.match(await docs.text(), /<html/i);
  });

  it('keeps the generated OpenAPI document in step with the committed one', async () => {
    const spec = (await call(t.url, 'GET', '/openapi.json')).body;
    const generated = JSON.stringify(spec, null, 2) + '\n';
    if (process.env.UPDATE_OPENAPI === '1') writeFileSync(openapiFixture, generated);
    assert.equal(
      generated,
      readFileSync(openapiFixture, 'utf8'),
      'the API changed: review it, then run UPDATE_OPENAPI=1 npm test to accept',
    );
  });
});
