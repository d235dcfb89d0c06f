import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sharedSerializers } from '../../src/http/plugins/serialization.js';
import { startTestServer } from '../kit/server.js';

const route = (schema: object) => ({ schema, method: 'GET', url: '/x', httpStatus: '200' });
/** A schema built afresh, as a route's plugin builds it for each server. */
const answer = () => ({
  type: 'object',
  properties: { name: { type: 'string' }, count: { type: 'integer' } },
});

describe('answers written by serializers shared within the process', () => {
  it('compiles a schema once, whoever builds it, and writes what the schema says', () => {
    const first = sharedSerializers({}, {})(route(answer()));
    const again = sharedSerializers({}, {})(route(answer()));
    assert.equal(again, first);
    assert.equal(first({ name: 'a', count: 2, secret: 'x' }), '{"name":"a","count":2}');
  });

  it('compiles again for another schema, or other shared schemas to refer to', () => {
    const first = sharedSerializers({}, {})(route(answer()));
    const narrower = sharedSerializers({}, {})(route({ ...answer(), required: ['name'] }));
    const otherShared = sharedSerializers(
      { Extra: { $id: 'Extra', type: 'string' } },
      {},
    )(route(answer()));
    assert.notEqual(narrower, first);
    assert.notEqual(otherShared, first);
    assert.throws(() => narrower({ count: 1 }), /name/);
  });

  it('serves the same answers from a second server in the process', async () => {
    const servers = [await startTestServer(), await startTestServer()];
    try {
      const bodies = await Promise.all(
        servers.map(async (t) => {
          const res = await fetch(`${t.url}/v1/almanac/agents/agent1nosuchagent`);
          return { status: res.status, body: await res.json() };
        }),
      );
      assert.deepEqual(bodies[1], bodies[0]);
      const health = await Promise.all(
        servers.map(async (t) => (await fetch(`${t.url}/health`)).json()),
      );
      assert.deepEqual(Object.keys(health[1] as object), Object.keys(health[0] as object));
    } finally {
      await Promise.all(servers.map((t) => t.close()));
    }
  });
});
