import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { EnvelopeFields } from '../../src/crypto/index.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

const ENVELOPE_KEYS = [
  'version',
  'sender',
  'target',
  'session',
  'schema_digest',
  'protocol_digest',
  'payload',
  'expires',
  'nonce',
  'signature',
];
const UUID4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * What the uAgents mailbox client does with one polled item, as far as it can fail: parse it
 * as a StoredEnvelope, skip (and never delete) one whose target is not its own address, and
 * decode the payload, which abandons the rest of the page when it throws.
 */
function clientHandles(item: Record<string, unknown>, ownAddress: string): string {
  assert.match(String(item.uuid), UUID4);
  const envelope = item.envelope as Record<string, unknown>;
  for (const [key, value] of Object.entries(envelope)) {
    assert.ok(ENVELOPE_KEYS.includes(key), `unexpected field ${key}`);
    assert.ok(value === null || typeof value !== 'object', `${key} nests`);
  }
  assert.equal(envelope.target, ownAddress, 'the client ignores a target spelled otherwise');
  const payload = envelope.payload as string | null;
  if (payload == null) return '';
  assert.match(payload, /^[A-Za-z0-9+/]*={0,2}$/);
  assert.equal(payload.length % 4, 0);
  return strictUtf8.decode(Buffer.from(payload, 'base64'));
}

/** `{"a":{"a":…}}` nested `depth` levels deep. */
function deeplyNested(depth: number): string {
  return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

describeOnEachDialect('envelope admission', (dialect) => {
  let t: TestServer;

  before(async () => {
    t = await startTestServer({ dialect });
  });
  after(() => t.close());

  const newAgent = () => newRegisteredAgent(hostOf(t), t.userKey);

  function signed(
    sender: TestIdentity,
    target: string,
    change: Partial<EnvelopeFields> = {},
  ): EnvelopeFields {
    return sender.signEnvelope({
      ...makeEnvelope({
        sender: sender.address,
        target,
        payloadJson: '{"text":"hello"}',
        nonce: Math.floor(Math.random() * 1e9),
      }),
      ...change,
    });
  }

  function submit(body: unknown) {
    return call(t.url, 'POST', '/v2/agents/mailbox/submit', { body });
  }

  async function poll(agent: TestIdentity) {
    const res = await call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox?limit=100`, {
      authorization: agent.authorization(),
    });
    assert.equal(res.status, 200, res.text);
    return res.body as Record<string, unknown>[];
  }

  async function assertRefused(body: unknown, field: string) {
    const res = await submit(body);
    assert.equal(res.status, 422, res.text);
    assert.ok(Array.isArray(res.body.detail), res.text);
    assert.deepEqual(
      res.body.detail.map((item: { loc: unknown[] }) => item.loc),
      [['body', field]],
      res.text,
    );
  }

  it('delivers the next honest message on the next poll after each of the three poisonings', async () => {
    const attacker = TestIdentity.random();
    const friend = TestIdentity.random();
    const poisonings: [string, (victim: TestIdentity) => Promise<void>][] = [
      [
        'an extra field nested 1,200 levels deep',
        async (victim) => {
          const text = JSON.stringify(signed(attacker, victim.address));
          const res = await call(t.url, 'POST', '/v2/agents/mailbox/submit', {
            rawBody: `${text.slice(0, -1)},"extra":${deeplyNested(1200)}}`,
          });
          // Refused, or admitted without the field the client cannot parse.
          assert.ok(res.status === 200 || (res.status >= 400 && res.status < 500), res.text);
        },
      ],
      [
        '100 envelopes whose target is the address in upper case',
        async (victim) => {
          const answers = await Promise.all(
            Array.from({ length: 100 }, () =>
              submit(signed(attacker, victim.address.toUpperCase())),
            ),
          );
          assert.deepEqual(new Set(answers.map((res) => res.status)), new Set([422]));
        },
      ],
      [
        'a payload that is not base64',
        async (victim) => {
          const res = await submit(signed(attacker, victim.address, { payload: 'not base64!' }));
          assert.equal(res.status, 422, res.text);
        },
      ],
    ];
    for (const [what, poison] of poisonings) {
      const victim = await newAgent();
      await poison(victim);
      const honest = signed(friend, victim.address, {
        payload: Buffer.from('{"text":"ping"}').toString('base64'),
      });
      assert.equal((await submit(honest)).status, 200, what);
      const page = await poll(victim);
      const handled = page.map((item) => clientHandles(item, victim.address));
      assert.ok(handled.includes('{"text":"ping"}'), `${what}: the ping is served`);
      assert.ok(
        page.some((item) => isDeepStrictEqual(item.envelope, honest)),
        `${what}: the ping is served as sent`,
      );
      // At most the poison itself, stripped of what the client cannot parse, comes first.
      assert.ok(page.length <= 2, `${what}: served ${page.length} messages`);
    }
  });

  it('refuses, storing nothing, an envelope whose addresses are not in lower case', async () => {
    const victim = await newAgent();
    const sender = TestIdentity.random();
    const mixed = victim.address.slice(0, 10) + victim.address.slice(10).toUpperCase();
    await assertRefused(signed(sender, victim.address.toUpperCase()), 'target');
    await assertRefused(signed(sender, mixed), 'target');
    await assertRefused(signed(sender, 'not-an-address'), 'target');
    const shouting = sender.signEnvelope(
      makeEnvelope({
        sender: sender.address.toUpperCase(),
        target: victim.address,
        payloadJson: '{}',
      }),
    );
    await assertRefused(shouting, 'sender');
    assert.deepEqual(await poll(victim), []);
  });

  it('refuses a payload that is not padded base64 of UTF-8 text, and takes one that is', async () => {
    const victim = await newAgent();
    const sender = TestIdentity.random();
    for (const payload of [
      'not base64!',
      'e30', // unpadded
      'e3=0',
      '-_-_',
      Buffer.from([0xff, 0xfe, 0x7b]).toString('base64'), // not UTF-8
      Buffer.from([0xed, 0xa0, 0x80]).toString('base64'), // an encoded lone surrogate
    ]) {
      await assertRefused(signed(sender, victim.address, { payload }), 'payload');
    }
    assert.deepEqual(await poll(victim), []);
    for (const payload of [null, '', Buffer.from('{"é":"✓"}').toString('base64')]) {
      const res = await submit(signed(sender, victim.address, { payload }));
      assert.equal(res.status, 200, res.text);
    }
    const page = await poll(victim);
    assert.deepEqual(
      page.map((item) => clientHandles(item, victim.address)),
      ['', '', '{"é":"✓"}'],
    );
  });

  it('refuses malformed digests and integers the client could not read back', async () => {
    const victim = await newAgent();
    const sender = TestIdentity.random();
    const hex = 'ab'.repeat(32);
    for (const schema_digest of ['model:ab', `proto:${hex}`, `model:${hex.toUpperCase()}`, '']) {
      await assertRefused(signed(sender, victim.address, { schema_digest }), 'schema_digest');
    }
    for (const protocol_digest of [`model:${hex}`, 'proto:', `proto:${hex}0`]) {
      await assertRefused(signed(sender, victim.address, { protocol_digest }), 'protocol_digest');
    }
    const base = signed(sender, victim.address);
    await assertRefused({ ...base, nonce: -1 }, 'nonce');
    await assertRefused({ ...base, nonce: 2 ** 60 }, 'nonce');
    await assertRefused({ ...base, version: 2 ** 60 }, 'version');
    assert.deepEqual(await poll(victim), []);
    const good = signed(sender, victim.address, { protocol_digest: `proto:${hex}` });
    assert.equal((await submit(good)).status, 200);
    assert.equal((await poll(victim)).length, 1);
  });

  it('stores and serves only the envelope’s own fields', async () => {
    const victim = await newAgent();
    const envelope = signed(TestIdentity.random(), victim.address);
    const res = await submit({ ...envelope, extra: { nested: [1, { deeper: true }] }, z: 1 });
    assert.equal(res.status, 200, res.text);
    const [item] = await poll(victim);
    assert.deepEqual(item?.envelope, envelope);
    assert.deepEqual(Object.keys(item!.envelope as object), Object.keys(envelope));
    // The same envelope without the extras is the same message.
    assert.equal((await submit(envelope)).status, 200);
    assert.equal((await poll(victim)).length, 1);
  });

  it('keeps a session spelled otherwise than the client would, as it is signed', async () => {
    const victim = await newAgent();
    const session = randomUUID().toUpperCase();
    const res = await submit(signed(TestIdentity.random(), victim.address, { session }));
    assert.equal(res.status, 200, res.text);
    const [item] = await poll(victim);
    assert.equal((item?.envelope as EnvelopeFields).session, session);
  });
});
