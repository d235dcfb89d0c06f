import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { encodeBech32, userAddressOf } from '../../src/crypto/index.js';
import { messageUuid } from '../../src/services/mailbox.js';
import { Store } from '../../src/store/index.js';
import { currentUsage, hostOf, newRegisteredAgent, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

const UUID4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const PYTHON_ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/;

describeOnEachDialect('mailbox', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  let otherKey: string;

  before(async () => {
    t = await startTestServer({ dialect, clock });
    otherKey = await t.addUser('other');
  });
  after(() => t.close());

  const newAgent = (key = t.userKey) => newRegisteredAgent(hostOf(t), key);

  function envelopeFrom(
    sender: TestIdentity,
    target: string,
    fields: { payload?: string; expires?: number; nonce?: number } = {},
  ) {
    return sender.signEnvelope(
      makeEnvelope({
        sender: sender.address,
        target,
        payloadJson: fields.payload ?? '{"text":"hello"}',
        expires: fields.expires,
        nonce: fields.nonce ?? Math.floor(Math.random() * 1e9),
      }),
    );
  }

  function submit(body: unknown, options: { key?: string; headers?: Record<string, string> } = {}) {
    return call(t.url, 'POST', '/v2/agents/mailbox/submit', { body, ...options });
  }

  function agentAuth(agent: TestIdentity, offsets = { from: -10, to: 1000 }): string {
    const now = Math.floor(clock.now() / 1000);
    return `Agent ${agent.attestation({ validFrom: now + offsets.from, validTo: now + offsets.to })}`;
  }

  function list(agent: TestIdentity, query = '', authorization = agentAuth(agent)) {
    return call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox${query}`, { authorization });
  }

  async function mailboxRow(agent: TestIdentity) {
    const row = await t.server.ctx.store.repos.mailbox.find(agent.address);
    assert.ok(row);
    return row;
  }

  const usageOf = (key: string) => currentUsage(t.url, key);

  it('stores a signed envelope and lists it as a StoredEnvelope uAgents accepts', async () => {
    const [recipient, sender] = [await newAgent(), TestIdentity.random()];
    const envelope = envelopeFrom(sender, recipient.address);
    const submitted = await submit(envelope);
    assert.equal(submitted.status, 200, submitted.text);
    assert.deepEqual(submitted.body, {});

    const listed = await list(recipient);
    assert.equal(listed.status, 200, listed.text);
    assert.equal(listed.body.length, 1);
    const [item] = listed.body;
    assert.deepEqual(Object.keys(item).sort(), ['envelope', 'expires_at', 'received_at', 'uuid']);
    assert.match(item.uuid, UUID4);
    assert.deepEqual(item.envelope, envelope);
    assert.match(item.received_at, PYTHON_ISO);
    assert.match(item.expires_at, PYTHON_ISO);
    assert.equal(
      Date.parse(item.expires_at) - Date.parse(item.received_at),
      t.config.mailboxRetentionSeconds * 1000,
    );
  });

  for (const s of ['high', 'low'] as const) {
    it(`accepts an envelope signed with a ${s}-s signature`, async () => {
      const [recipient, sender] = [await newAgent(), TestIdentity.random()];
      const envelope = sender.signEnvelope(
        makeEnvelope({ sender: sender.address, target: recipient.address, payloadJson: '{}' }),
        { s },
      );
      assert.equal((await submit(envelope)).status, 200);
    });
  }

  for (const [what, change] of [
    ['payload', { payload: Buffer.from('{"text":"changed"}').toString('base64') }],
    ['nonce', { nonce: 12345 }],
    ['sender', { sender: TestIdentity.random().address }],
    ['session', { session: '6f1c5d0e-8b1a-4c2d-9e3f-0a1b2c3d4e5f' }],
  ] as const) {
    it(`submit rejects an envelope whose ${what} was changed after signing`, async () => {
      const [recipient, sender] = [await newAgent(), TestIdentity.random()];
      const res = await submit({ ...envelopeFrom(sender, recipient.address), ...change });
      assert.equal(res.status, 400, res.text);
      assert.deepEqual(res.body, { detail: 'Unable to validate envelope' });
      assert.deepEqual((await list(recipient)).body, []);
    });
  }

  it('submit rejects an agent envelope without a signature', async () => {
    const [recipient, sender] = [await newAgent(), TestIdentity.random()];
    const unsigned = makeEnvelope({
      sender: sender.address,
      target: recipient.address,
      payloadJson: '{}',
    });
    for (const body of [unsigned, { ...unsigned, signature: null }]) {
      const res = await submit(body);
      assert.equal(res.status, 400);
      assert.deepEqual(res.body, { detail: 'Unable to validate envelope' });
    }
  });

  it("accepts a user-address sender only with that user's own API key", async () => {
    const recipient = await newAgent();
    const sender = userAddressOf(t.server.bootstrapped!.user.id);
    const envelope = makeEnvelope({ sender, target: recipient.address, payloadJson: '{}' });
    const anonymous = await submit(envelope);
    assert.equal(anonymous.status, 400);
    assert.match(anonymous.body.detail, /^Unable to validate envelope/);
    const badKey = await submit(envelope, { key: 'agy_nope' });
    assert.equal(badKey.status, 401);
    const anotherUser = await submit(envelope, { key: otherKey });
    assert.equal(anotherUser.status, 400, anotherUser.text);
    assert.match(anotherUser.body.detail, /^Unable to validate envelope/);
    const strangers = [encodeBech32('user', randomBytes(32)), userAddressOf('someone else')];
    for (const stranger of strangers) {
      const claimed = makeEnvelope({
        sender: stranger,
        target: recipient.address,
        payloadJson: '{}',
      });
      assert.equal((await submit(claimed, { key: t.userKey })).status, 400);
    }
    assert.equal((await list(recipient)).body.length, 0);
    const withKey = await submit(envelope, { key: t.userKey });
    assert.equal(withKey.status, 200, withKey.text);
    assert.equal((await list(recipient)).body.length, 1);
    const ownedByOther = await submit(
      makeEnvelope({ sender, target: recipient.address, payloadJson: '{"n":2}' }),
      { key: otherKey },
    );
    assert.equal(ownedByOther.status, 400);
  });

  it('refuses an envelope that has expired and keeps one no longer than it allows', async () => {
    const [recipient, sender] = [await newAgent(), TestIdentity.random()];
    const nowSeconds = Math.floor(clock.now() / 1000);
    const expired = await submit(
      envelopeFrom(sender, recipient.address, { expires: nowSeconds - 1 }),
    );
    assert.equal(expired.status, 400);
    assert.deepEqual(expired.body, { detail: 'Envelope expired' });

    const shortLived = envelopeFrom(sender, recipient.address, { expires: nowSeconds + 30 });
    assert.equal((await submit(shortLived)).status, 200);
    const [item] = (await list(recipient)).body;
    assert.equal(Date.parse(item.expires_at), (nowSeconds + 30) * 1000);
  });

  it('answers 404 for a target that is not registered', async () => {
    const res = await submit(envelopeFrom(TestIdentity.random(), TestIdentity.random().address));
    assert.equal(res.status, 404);
    assert.deepEqual(res.body, {
      detail: 'No registered address found matching envelope target',
    });
  });

  it('refuses a body over the envelope limit with 413', async () => {
    const [recipient, sender] = [await newAgent(), TestIdentity.random()];
    const big = envelopeFrom(sender, recipient.address, {
      payload: JSON.stringify({ text: 'x'.repeat(t.config.envelopeBodyLimitBytes) }),
    });
    const res = await submit(big);
    assert.equal(res.status, 413);
    assert.equal(typeof res.body.detail, 'string');
  });

  it('accepts an envelope larger than the limit of other bodies', async () => {
    const [recipient, sender] = [await newAgent(), TestIdentity.random()];
    const large = envelopeFrom(sender, recipient.address, {
      payload: JSON.stringify({ text: 'x'.repeat(t.config.bodyLimitBytes) }),
    });
    assert.equal((await submit(large)).status, 200);
  });

  it('answers 422 in pydantic style for what is not an Envelope', async () => {
    const [recipient, sender] = [await newAgent(), TestIdentity.random()];
    const good = envelopeFrom(sender, recipient.address);

    const missing = await submit({ ...good, sender: undefined });
    assert.equal(missing.status, 422);
    assert.deepEqual(
      missing.body.detail.map((i: { loc: unknown; type: string }) => [i.loc, i.type]),
      [[['body', 'sender'], 'missing']],
    );

    const wrongTypes = await submit({ ...good, version: 'one', nonce: 'x', payload: 5 });
    assert.equal(wrongTypes.status, 422);
    assert.deepEqual(wrongTypes.body.detail.map((i: { loc: unknown[] }) => i.loc[1]).sort(), [
      'nonce',
      'payload',
      'version',
    ]);

    const badSession = await submit({ ...good, session: 'not-a-uuid' });
    assert.equal(badSession.status, 422);
    assert.deepEqual(badSession.body.detail[0].loc, ['body', 'session']);
    assert.equal(badSession.body.detail[0].type, 'uuid_parsing');

    const version1 = await submit({ ...good, session: 'c232ab00-9414-11ec-b3c8-9f6bdeced846' });
    assert.equal(version1.status, 422);
    assert.equal(version1.body.detail[0].type, 'uuid_version');

    const notJson = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { rawBody: '{"a":' });
    assert.equal(notJson.status, 422);
    assert.equal(notJson.body.detail[0].type, 'json_invalid');

    const notObject = await submit([good]);
    assert.equal(notObject.status, 422);
    assert.deepEqual(notObject.body.detail[0].loc, ['body']);
  });

  it('stores an identical envelope submitted again only once', async () => {
    const [recipient, sender] = [await newAgent(), TestIdentity.random()];
    const before = await usageOf(t.userKey);
    const envelope = envelopeFrom(sender, recipient.address);
    const answers = await Promise.all([submit(envelope), submit(envelope), submit(envelope)]);
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200, 200],
    );
    assert.equal((await submit(envelope)).status, 200);
    assert.equal((await list(recipient)).body.length, 1);
    assert.equal((await mailboxRow(recipient)).pending_messages, 1);
    assert.equal((await usageOf(t.userKey)).num_messages, before.num_messages + 1);

    // Signing the same content again is a new message (uAgents re-signs only new sends).
    const { signature: _first, ...content } = envelope;
    const resigned = sender.signEnvelope(content);
    assert.notEqual(resigned.signature, envelope.signature);
    assert.equal((await submit(resigned)).status, 200);
    assert.equal((await list(recipient)).body.length, 2);
  });

  it('answers each of many concurrent submits only once its message is committed', async () => {
    const recipient = await newAgent();
    const senders = [TestIdentity.random(), TestIdentity.random()];
    const envelopes = Array.from({ length: 40 }, (_, i) =>
      envelopeFrom(senders[i % 2]!, recipient.address, { nonce: i }),
    );
    // Another connection sees only what is committed.
    const observer = Store.open(t.config.databaseUrl);
    try {
      const seenAtAnswer = await Promise.all(
        envelopes.map(async (envelope) => {
          const answer = await submit(envelope);
          assert.equal(answer.status, 200, answer.text);
          const uuid = messageUuid(envelope);
          return (
            (await observer.repos.mailbox.findPending(recipient.address, uuid, 0)) !== undefined
          );
        }),
      );
      assert.deepEqual(
        seenAtAnswer,
        envelopes.map(() => true),
      );
    } finally {
      await observer.close();
    }
    assert.equal((await mailboxRow(recipient)).pending_messages, envelopes.length);
  });

  it('refuses only the envelopes at fault among many that arrive together', async () => {
    const owner = await t.addUser('group-quota');
    const principal = await t.server.ctx.services.keys.authenticate(owner);
    assert.equal(principal.kind, 'user');
    await t.server.ctx.services.usage.setLimits(principal.userId, { messagesPerMonth: 3 });
    const limited = await newAgent(owner);
    const open = await newAgent();
    const sender = TestIdentity.random();
    const stored = envelopeFrom(sender, open.address);
    assert.equal((await submit(stored)).status, 200);
    const openBefore = (await mailboxRow(open)).pending_messages;

    const burst = [
      ...Array.from({ length: 5 }, () => envelopeFrom(sender, limited.address)),
      ...Array.from({ length: 5 }, () => envelopeFrom(sender, open.address)),
      envelopeFrom(sender, TestIdentity.random().address),
      stored,
    ];
    const statuses = (await Promise.all(burst.map((envelope) => submit(envelope)))).map(
      (answer) => answer.status,
    );
    const limitedStatuses = statuses.slice(0, 5);
    assert.equal(limitedStatuses.filter((status) => status === 200).length, 3);
    assert.equal(limitedStatuses.filter((status) => status === 406).length, 2);
    assert.deepEqual(statuses.slice(5), [200, 200, 200, 200, 200, 404, 200]);

    assert.equal((await mailboxRow(limited)).pending_messages, 3);
    assert.equal((await list(limited)).body.length, 3);
    assert.equal((await mailboxRow(open)).pending_messages, openBefore + 5);
    assert.equal((await usageOf(owner)).num_messages, 3);
  });

  it('stores a message sent with x-uagents-connection: sync like any other', async () => {
    const [recipient, sender] = [await newAgent(), TestIdentity.random()];
    const res = await submit(envelopeFrom(sender, recipient.address), {
      headers: { 'x-uagents-connection': 'sync' },
    });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {});
    assert.equal((await list(recipient)).body.length, 1);
  });

  it('lists oldest first, a page at a time', async () => {
    const [recipient, sender] = [await newAgent(), TestIdentity.random()];
    const sent = [];
    for (let i = 0; i < 5; i++) {
      const envelope = envelopeFrom(sender, recipient.address, { payload: `{"n":${i}}` });
      assert.equal((await submit(envelope)).status, 200);
      sent.push(envelope.signature);
      clock.advance(1);
    }
    const all = await list(recipient);
    assert.deepEqual(
      all.body.map((item: { envelope: { signature: string } }) => item.envelope.signature),
      sent,
    );
    const page = await list(recipient, '?limit=2&offset=2');
    assert.deepEqual(
      page.body.map((item: { envelope: { signature: string } }) => item.envelope.signature),
      sent.slice(2, 4),
    );
    for (const query of ['?limit=0', '?limit=1001', '?offset=-1', '?limit=many']) {
      const res = await list(recipient, query);
      assert.equal(res.status, 422, query);
      assert.equal(res.body.detail[0].loc[0], 'query');
    }
  });

  it('gets and deletes one message by its uuid, and counts both ways', async () => {
    const [recipient, sender] = [await newAgent(), TestIdentity.random()];
    const envelope = envelopeFrom(sender, recipient.address);
    await submit(envelope);
    const stored = await mailboxRow(recipient);
    assert.equal(stored.pending_messages, 1);
    assert.equal(stored.bytes_stored, Buffer.byteLength(JSON.stringify(envelope)));

    const [item] = (await list(recipient)).body;
    const path = `/v2/agents/${recipient.address}/mailbox/${item.uuid}`;
    const auth = agentAuth(recipient);
    const got = await call(t.url, 'GET', path, { authorization: auth });
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, item);

    const deleted = await call(t.url, 'DELETE', path, { authorization: auth });
    assert.equal(deleted.status, 200);
    assert.deepEqual(deleted.body, {});
    assert.deepEqual((await list(recipient)).body, []);
    assert.deepEqual(
      [(await mailboxRow(recipient)).pending_messages, (await mailboxRow(recipient)).bytes_stored],
      [0, 0],
    );
    for (const method of ['GET', 'DELETE']) {
      const again = await call(t.url, method, path, { authorization: auth });
      assert.equal(again.status, 404);
      assert.deepEqual(again.body, { detail: 'Unable to lookup mailbox entry' });
    }
    const malformed = await call(t.url, 'GET', `/v2/agents/${recipient.address}/mailbox/nope`, {
      authorization: auth,
    });
    assert.equal(malformed.status, 422);
    assert.deepEqual(malformed.body.detail[0].loc, ['path', 'uuid']);
  });

  it("does not serve one agent's message through another agent's path", async () => {
    const [a, b, sender] = [await newAgent(), await newAgent(), TestIdentity.random()];
    await submit(envelopeFrom(sender, a.address));
    const [item] = (await list(a)).body;
    const res = await call(t.url, 'GET', `/v2/agents/${b.address}/mailbox/${item.uuid}`, {
      authorization: agentAuth(b),
    });
    assert.equal(res.status, 404);
  });

  it('lets the owner read with a key and reports other users as not found', async () => {
    const [recipient, sender] = [await newAgent(), TestIdentity.random()];
    await submit(envelopeFrom(sender, recipient.address));
    const path = `/v2/agents/${recipient.address}/mailbox`;
    const owner = await call(t.url, 'GET', path, { key: t.userKey });
    assert.equal(owner.status, 200);
    assert.equal(owner.body.length, 1);
    const stranger = await call(t.url, 'GET', path, { key: otherKey });
    assert.equal(stranger.status, 404);
    const strangerDelete = await call(t.url, 'DELETE', `${path}/${owner.body[0].uuid}`, {
      key: otherKey,
    });
    assert.equal(strangerDelete.status, 404);
    assert.equal((await list(recipient)).body.length, 1);
  });

  it('re-uses one attestation for many requests and refuses foreign, expired or bad ones', async () => {
    const [recipient, intruder] = [await newAgent(), await newAgent()];
    const auth = agentAuth(recipient);
    for (let i = 0; i < 5; i++) assert.equal((await list(recipient, '', auth)).status, 200);

    const foreign = await list(recipient, '', agentAuth(intruder));
    assert.equal(foreign.status, 403);

    const expired = await list(recipient, '', agentAuth(recipient, { from: -2000, to: -100 }));
    assert.equal(expired.status, 401);
    assert.match(expired.headers.get('www-authenticate') ?? '', /Agent/);

    const forged = auth.replace(/.{6}$/, 'qqqqqq');
    assert.equal((await list(recipient, '', forged)).status, 401);
    assert.equal((await list(recipient, '', 'Agent attr:nonsense')).status, 401);
    const none = await call(t.url, 'GET', `/v2/agents/${recipient.address}/mailbox`);
    assert.equal(none.status, 401);

    clock.advance(2000 * 1000);
    assert.equal((await list(recipient, '', auth)).status, 401, 'the window has passed');
  });

  it('takes an address in upper case alike from the agent and from its owner', async () => {
    const [recipient, sender] = [await newAgent(), TestIdentity.random()];
    await submit(envelopeFrom(sender, recipient.address));
    const path = `/v2/agents/${recipient.address.toUpperCase()}/mailbox`;
    const byKey = await call(t.url, 'GET', path, { key: t.userKey });
    assert.equal(byKey.status, 200, byKey.text);
    const byAgent = await call(t.url, 'GET', path, { authorization: agentAuth(recipient) });
    assert.equal(byAgent.status, 200, byAgent.text);
    assert.deepEqual(byAgent.body, byKey.body);
    const removed = await call(t.url, 'DELETE', `${path}/${byAgent.body[0].uuid.toUpperCase()}`, {
      authorization: agentAuth(recipient),
    });
    assert.equal(removed.status, 200, removed.text);
    assert.deepEqual((await list(recipient)).body, []);
  });

  it('answers 404 to an agent that has no mailbox', async () => {
    const stranger = TestIdentity.random();
    const res = await list(stranger);
    assert.equal(res.status, 404);
    assert.equal(typeof res.body.detail, 'string');
  });

  it('enforces the message quota with 406', async () => {
    const owner = await t.addUser('messages-quota');
    const principal = await t.server.ctx.services.keys.authenticate(owner);
    assert.equal(principal.kind, 'user');
    await t.server.ctx.services.usage.setLimits(principal.userId, { messagesPerMonth: 2 });
    const [recipient, sender] = [await newAgent(owner), TestIdentity.random()];
    assert.equal((await submit(envelopeFrom(sender, recipient.address))).status, 200);
    assert.equal((await submit(envelopeFrom(sender, recipient.address))).status, 200);
    const refused = await submit(envelopeFrom(sender, recipient.address));
    assert.equal(refused.status, 406);
    assert.deepEqual(refused.body, { detail: 'Message quota reached 2 / 2' });
  });

  it('enforces the storage quota with 406 and frees space on delete', async () => {
    const owner = await t.addUser('storage-quota');
    const principal = await t.server.ctx.services.keys.authenticate(owner);
    assert.equal(principal.kind, 'user');
    const [recipient, sender] = [await newAgent(owner), TestIdentity.random()];
    const first = envelopeFrom(sender, recipient.address);
    const size = Buffer.byteLength(JSON.stringify(first));
    await t.server.ctx.services.usage.setLimits(principal.userId, { bytesStored: size + 10 });
    assert.equal((await submit(first)).status, 200);
    const refused = await submit(envelopeFrom(sender, recipient.address));
    assert.equal(refused.status, 406);
    assert.deepEqual(refused.body, { detail: `Storage quota reached ${size} / ${size + 10}` });

    const [item] = (await list(recipient)).body;
    const auth = agentAuth(recipient);
    await call(t.url, 'DELETE', `/v2/agents/${recipient.address}/mailbox/${item.uuid}`, {
      authorization: auth,
    });
    assert.equal((await submit(envelopeFrom(sender, recipient.address))).status, 200);
  });

  it("keeps each owner's stored total equal to its mailboxes through every change", async () => {
    const owner = await t.addUser('stored-total');
    const principal = await t.server.ctx.services.keys.authenticate(owner);
    assert.equal(principal.kind, 'user');
    const store = t.server.ctx.store;
    const totalMatches = async (expected: number) => {
      const mailboxes = await store.db
        .selectFrom('mailboxes')
        .select('bytes_stored')
        .where('user_id', '=', principal.userId)
        .execute();
      const summed = mailboxes.reduce((sum, row) => sum + Number(row.bytes_stored), 0);
      const kept = await store.db
        .selectFrom('user_storage')
        .select('bytes_stored')
        .where('user_id', '=', principal.userId)
        .executeTakeFirst();
      assert.equal(summed, expected);
      assert.equal(Number(kept?.bytes_stored ?? 0), expected);
    };
    const [a, b, sender] = [await newAgent(owner), await newAgent(owner), TestIdentity.random()];
    const nowSeconds = Math.floor(clock.now() / 1000);
    const sent = [
      envelopeFrom(sender, a.address),
      envelopeFrom(sender, a.address, { expires: nowSeconds + 5 }),
      envelopeFrom(sender, b.address),
      envelopeFrom(sender, b.address),
    ];
    const results = await Promise.all(sent.map((envelope) => submit(envelope)));
    assert.deepEqual(
      results.map((res) => res.status),
      [200, 200, 200, 200],
    );
    assert.equal((await submit(sent[0])).status, 200, 'a resubmission stores nothing');
    const sizes = sent.map((envelope) => Buffer.byteLength(JSON.stringify(envelope)));
    await totalMatches(sizes[0]! + sizes[1]! + sizes[2]! + sizes[3]!);

    const [first] = (await list(a)).body;
    const deleted = await call(t.url, 'DELETE', `/v2/agents/${a.address}/mailbox/${first.uuid}`, {
      authorization: agentAuth(a),
    });
    assert.equal(deleted.status, 200);
    await totalMatches(sizes[1]! + sizes[2]! + sizes[3]!);

    clock.advance(6000);
    await t.server.ctx.services.mailbox.sweepExpired();
    await totalMatches(sizes[2]! + sizes[3]!);

    const removed = await call(t.url, 'DELETE', `/v2/agents/${b.address}`, { key: owner });
    assert.equal(removed.status, 200, removed.text);
    await totalMatches(0);
  });

  it('counts bytes served and never serves past the transfer quota', async () => {
    const owner = await t.addUser('transfer-quota');
    const principal = await t.server.ctx.services.keys.authenticate(owner);
    assert.equal(principal.kind, 'user');
    const [recipient, sender] = [await newAgent(owner), TestIdentity.random()];
    const envelopes = [1, 2, 3].map((nonce) => envelopeFrom(sender, recipient.address, { nonce }));
    for (const envelope of envelopes) assert.equal((await submit(envelope)).status, 200);
    const size = Buffer.byteLength(JSON.stringify(envelopes[0]));
    const limit = 2 * size + Math.floor(size / 2);
    await t.server.ctx.services.usage.setLimits(principal.userId, {
      bytesTransferredPerMonth: limit,
    });

    const served = await list(recipient);
    assert.equal(served.status, 200);
    assert.deepEqual(
      served.body.map((item: { envelope: unknown }) => item.envelope),
      envelopes.slice(0, 2),
    );
    assert.equal((await usageOf(owner)).bytes_transferred, 2 * size);
    const refused = await list(recipient);
    assert.equal(refused.status, 406);
    assert.deepEqual(refused.body, { detail: `Transfer quota reached ${2 * size} / ${limit}` });
    const one = await call(
      t.url,
      'GET',
      `/v2/agents/${recipient.address}/mailbox/${served.body[0].uuid}`,
      { authorization: agentAuth(recipient) },
    );
    assert.equal(one.status, 406);
    assert.equal((await usageOf(owner)).bytes_transferred, 2 * size, 'never past the quota');

    await t.server.ctx.services.usage.setLimits(principal.userId, {
      bytesTransferredPerMonth: 2 * size,
    });
    const spent = await list(recipient);
    assert.equal(spent.status, 406);
  });

  it('never lists an expired message and sweeps it with its counters', async () => {
    const [recipient, sender] = [await newAgent(), TestIdentity.random()];
    const nowSeconds = Math.floor(clock.now() / 1000);
    await submit(envelopeFrom(sender, recipient.address, { expires: nowSeconds + 5 }));
    await submit(envelopeFrom(sender, recipient.address));
    assert.equal((await list(recipient)).body.length, 2);

    clock.advance(6000);
    const auth = agentAuth(recipient);
    assert.equal((await list(recipient, '', auth)).body.length, 1, 'hidden before the sweep');
    assert.equal((await mailboxRow(recipient)).pending_messages, 2);

    assert.ok((await t.server.ctx.services.mailbox.sweepExpired()) >= 1);
    assert.equal((await mailboxRow(recipient)).pending_messages, 1);

    clock.advance(t.config.mailboxRetentionSeconds * 1000);
    assert.deepEqual((await list(recipient, '', agentAuth(recipient))).body, []);
    await t.server.ctx.services.mailbox.sweepExpired();
    const emptied = await mailboxRow(recipient);
    assert.deepEqual([emptied.pending_messages, emptied.bytes_stored], [0, 0]);
  });

  it('removes pending messages with the mailbox', async () => {
    const [recipient, sender] = [await newAgent(), TestIdentity.random()];
    await submit(envelopeFrom(sender, recipient.address));
    const store = t.server.ctx.store;
    assert.equal(await store.repos.mailbox.close(recipient.address), true);
    const left = await store.db
      .selectFrom('messages')
      .select('uuid')
      .where('address', '=', recipient.address)
      .execute();
    assert.deepEqual(left, []);
    assert.equal((await list(recipient)).status, 404);
  });

  it('answers the readiness probe for agents with and without a mailbox', async () => {
    const recipient = await newAgent();
    const probe = async (method: string, address?: string) => {
      const res = await call(t.url, method, '/v2/agents/mailbox/submit', {
        headers: address ? { 'x-uagents-address': address } : {},
      });
      assert.equal(res.status, 200);
      if (method === 'GET') assert.deepEqual(res.body, {});
      return res.headers.get('x-uagents-status');
    };
    for (const method of ['GET', 'HEAD']) {
      assert.equal(await probe(method, recipient.address), 'ready');
      assert.equal(await probe(method, TestIdentity.random().address), 'not-ready');
      assert.equal(await probe(method), 'indeterminate');
    }
  });
});

describeOnEachDialect('mailbox checking signatures on the event loop', (dialect) => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ dialect, config: { verifierThreads: 0 } });
  });
  after(() => t.close());

  it('accepts high- and low-s envelopes and refuses a tampered one', async () => {
    const recipient = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, recipient);
    const sender = TestIdentity.random();
    const envelopeWith = (s: 'high' | 'low', nonce: number) =>
      sender.signEnvelope(
        makeEnvelope({
          sender: sender.address,
          target: recipient.address,
          payloadJson: '{"text":"inline"}',
          nonce,
        }),
        { s },
      );
    const submit = (body: unknown) => call(t.url, 'POST', '/v2/agents/mailbox/submit', { body });
    assert.equal((await submit(envelopeWith('high', 1))).status, 200);
    assert.equal((await submit(envelopeWith('low', 2))).status, 200);
    const tampered = { ...envelopeWith('low', 3), nonce: 4 };
    assert.equal((await submit(tampered)).status, 400);
  });
});
