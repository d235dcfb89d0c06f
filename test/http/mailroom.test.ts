import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { EnvelopeFields } from '../../src/crypto/index.js';
import { messageUuid } from '../../src/services/mailbox.js';
import { clientCall } from '../kit/agentverse-client.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call, type JsonResponse } from '../kit/http.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/** A string as pydantic's `model_dump_json` writes it (the same as JSON's for these values). */
const q = (value: string | null): string => JSON.stringify(value);

interface StoredItem {
  uuid: string;
  envelope: EnvelopeFields;
  received_at: string;
  expires_at: string;
}

/**
 * The Agentverse calls of uAgents 0.22.10 (`uagents/mailbox.py` at tag v0.22.10), with the
 * bodies and headers its code builds: pydantic models dumped as compact JSON in field order,
 * `content-type: application/json` on the posts, `Authorization: Bearer <user token>` from the
 * agent's own `/connect`, and `Authorization: token <access token>` from its mailbox client.
 */
class Uagents022Agent {
  accessToken: string | null = null;

  constructor(
    readonly base: string,
    readonly identity: TestIdentity,
    readonly prefix: 'agent' | 'test-agent' = 'test-agent',
  ) {}

  get address(): string {
    return this.identity.address;
  }

  /** `ChallengeRequest(address=…).model_dump_json()`, with the user's key or without. */
  requestChallenge(userToken?: string): Promise<JsonResponse<any>> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (userToken !== undefined) headers.Authorization = `Bearer ${userToken}`;
    return call(this.base, 'POST', '/v1/auth/challenge', {
      rawBody: `{"address":${q(this.address)}}`,
      headers,
    });
  }

  /**
   * `register_in_agentverse`: what the agent's own `POST /connect` does with the
   * `AgentverseConnectRequest` the inspector sent it; answers what `/connect` answers.
   */
  async connect(
    userToken: string,
    agentType: 'mailbox' | 'proxy' | 'custom',
    endpoint: string | null,
    details?: { name: string; readme: string | null; avatarUrl: string | null },
  ): Promise<{ success: boolean; detail?: string; status: number }> {
    const challenge = await this.requestChallenge(userToken);
    // resp.raise_for_status(): the agent's /connect answers 500 on anything but 2xx.
    if (challenge.status >= 400) return { success: false, status: 500 };
    const signed = this.identity.signChallenge(challenge.body.challenge);
    const registration = await call(this.base, 'POST', '/v1/agents', {
      rawBody:
        `{"address":${q(this.address)},"prefix":${q(this.prefix)},` +
        `"challenge":${q(challenge.body.challenge)},"challenge_response":${q(signed)},` +
        `"agent_type":${q(agentType)},"endpoint":${q(endpoint)}}`,
      headers: { 'content-type': 'application/json', Authorization: `Bearer ${userToken}` },
    });
    if (registration.status !== 200) {
      return { success: false, detail: registration.body.detail, status: 200 };
    }
    if (details) {
      // AgentUpdates(name, readme, avatar_url, agent_type=request.agent_type); the client
      // only logs a failure here.
      const updated = await call(this.base, 'PUT', `/v1/agents/${this.address}`, {
        rawBody:
          `{"name":${q(details.name)},"readme":${q(details.readme)},` +
          `"avatar_url":${q(details.avatarUrl)},"short_description":null,` +
          `"agent_type":${q(agentType)}}`,
        headers: { 'content-type': 'application/json', Authorization: `Bearer ${userToken}` },
      });
      assert.equal(updated.status, 200, updated.text);
    }
    return { success: true, status: 200 };
  }

  /** `unregister_in_agentverse`, from the agent's `POST /disconnect`. */
  disconnect(userToken: string): Promise<JsonResponse<any>> {
    return call(this.base, 'DELETE', `/v1/agents/${this.address}`, {
      headers: { 'content-type': 'application/json', Authorization: `Bearer ${userToken}` },
    });
  }

  /** `MailboxClient._get_access_token`. */
  async getAccessToken(): Promise<JsonResponse<any>> {
    const challenge = await this.requestChallenge();
    assert.equal(challenge.status, 200, challenge.text);
    const text: string = challenge.body.challenge;
    const proof = await call(this.base, 'POST', '/v1/auth/prove', {
      rawBody:
        `{"address":${q(this.address)},"challenge":${q(text)},` +
        `"challenge_response":${q(this.identity.signChallenge(text))}}`,
      headers: { 'content-type': 'application/json' },
    });
    if (proof.status === 200) this.accessToken = proof.body.access_token;
    return proof;
  }

  /** One turn of `MailboxClient._check_mailbox_loop` (a 401 drops the token). */
  async poll(): Promise<JsonResponse<any>> {
    if (this.accessToken === null) await this.getAccessToken();
    const res = await call(this.base, 'GET', '/v1/mailbox', {
      headers: { Authorization: `token ${this.accessToken}` },
    });
    if (res.status === 401) this.accessToken = null;
    return res;
  }

  /** Polls as the client does and deletes each item it handled; returns the items. */
  async receive(): Promise<StoredItem[]> {
    const res = await this.poll();
    assert.equal(res.status, 200, res.text);
    const items = res.body.items as StoredItem[];
    for (const item of items) {
      const deleted = await this.deleteEnvelope(item.uuid);
      assert.equal(deleted.status, 200, deleted.text);
    }
    return items;
  }

  /** `MailboxClient._delete_envelope`. */
  deleteEnvelope(uuid: string): Promise<JsonResponse<any>> {
    return call(this.base, 'DELETE', `/v1/mailbox/${uuid}`, {
      headers: { Authorization: `token ${this.accessToken}` },
    });
  }
}

function envelopeFrom(sender: TestIdentity, target: string, text: string): EnvelopeFields {
  return sender.signEnvelope(
    makeEnvelope({
      sender: sender.address,
      target,
      payloadJson: JSON.stringify({ text }),
      nonce: Math.floor(Math.random() * 1e9),
    }),
  );
}

/** An agent's own HTTP endpoint on loopback that keeps what it is sent. */
async function startRecordingEndpoint(): Promise<{
  url: string;
  received: string[];
  close(): Promise<void>;
}> {
  const received: string[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      received.push(body);
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  return { url: await listenOnLoopback(server), received, close: () => closeNow(server) };
}

describeOnEachDialect('v1 mailroom', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  let bobKey: string;
  let endpoint: Awaited<ReturnType<typeof startRecordingEndpoint>>;

  before(async () => {
    endpoint = await startRecordingEndpoint();
    t = await startTestServer({ dialect, clock, config: { allowPrivateTargets: true } });
    bobKey = await t.addUser('bob');
  });
  after(async () => {
    await t.close();
    await endpoint.close();
  });

  /** A 0.22 mailbox agent, connected by the first user through its `/connect`. */
  async function connectedMailboxAgent(): Promise<Uagents022Agent> {
    const agent = new Uagents022Agent(t.url, TestIdentity.random());
    assert.deepEqual(await agent.connect(t.userKey, 'mailbox', null), {
      success: true,
      status: 200,
    });
    return agent;
  }

  function submit(path: string, envelope: EnvelopeFields): Promise<JsonResponse<any>> {
    return call(t.url, 'POST', path, {
      rawBody: JSON.stringify(envelope),
      headers: { 'content-type': 'application/json' },
    });
  }

  it('connects a 0.22 agent: challenge and registration with the user key, then its details', async () => {
    const agent = new Uagents022Agent(t.url, TestIdentity.random());
    const challenge = await agent.requestChallenge(t.userKey);
    assert.equal(challenge.status, 200, challenge.text);
    assert.deepEqual(Object.keys(challenge.body), ['challenge']);

    const connected = await agent.connect(t.userKey, 'mailbox', null, {
      name: 'a name longer than the thirty-two characters of v2',
      readme: '# What I do',
      avatarUrl: null,
    });
    assert.deepEqual(connected, { success: true, status: 200 });
    // One registry: the agent is the user's v2 agent, with its mailbox.
    const listing = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
    assert.equal(listing.status, 200, listing.text);
    assert.equal(listing.body.name, 'a name longer than the thirty-two characters of v2');
    assert.equal(listing.body.profile.readme, '# What I do');
    assert.equal(listing.body.redirect_url, null);
    const probe = await call(t.url, 'HEAD', '/v1/submit', {
      headers: { 'x-uagents-address': agent.address },
    });
    assert.equal(probe.headers.get('x-uagents-status'), 'ready');

    // Connecting again (every restart) keeps what the owner set; null details keep theirs.
    await call(t.url, 'PUT', `/v2/agents/${agent.address}`, {
      key: t.userKey,
      body: { address: agent.address, profile: { description: 'set in the console' } },
    });
    assert.equal(
      (
        await agent.connect(t.userKey, 'mailbox', null, {
          name: 'renamed',
          readme: null,
          avatarUrl: null,
        })
      ).success,
      true,
    );
    const again = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
    assert.equal(again.body.name, 'renamed');
    assert.equal(again.body.profile.description, 'set in the console');
  });

  it('answers the v1 agent shape to a details update', async () => {
    const agent = await connectedMailboxAgent();
    const res = await call(t.url, 'PUT', `/v1/agents/${agent.address}`, {
      key: t.userKey,
      body: { name: 'shaped', readme: null, short_description: 'short' },
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, {
      address: agent.address,
      name: 'shaped',
      pending_messages: 0,
      bytes_transferred: 0,
      previous_bytes_transferred: 0,
      readme: null,
      avatar_url: null,
      short_description: 'short',
      agent_type: 'mailbox',
    });
  });

  it('refuses a registration whose challenge was not issued to the user, or another user’s agent', async () => {
    const agent = new Uagents022Agent(t.url, TestIdentity.random());
    // A challenge asked for without a key is the agent's, for its access token.
    const anonymous = await agent.requestChallenge();
    const res = await call(t.url, 'POST', '/v1/agents', {
      key: t.userKey,
      body: {
        address: agent.address,
        challenge: anonymous.body.challenge,
        challenge_response: agent.identity.signChallenge(anonymous.body.challenge),
        agent_type: 'mailbox',
      },
    });
    assert.equal(res.status, 400, res.text);
    assert.match(res.body.detail, /Invalid challenge/);

    assert.equal((await agent.connect(t.userKey, 'mailbox', null)).success, true);
    const taken = await agent.connect(bobKey, 'mailbox', null);
    assert.equal(taken.success, false);
    assert.match(taken.detail ?? '', /another account/);

    // A bad user key: the agent's /connect answers 500, as with the hosted service's errors.
    const stranger = new Uagents022Agent(t.url, TestIdentity.random());
    assert.deepEqual(await stranger.connect('agy_nosuchkey', 'mailbox', null), {
      success: false,
      status: 500,
    });
  });

  it('issues an access token bound to the address for the signed challenge', async () => {
    const agent = await connectedMailboxAgent();
    const proof = await agent.getAccessToken();
    assert.equal(proof.status, 200, proof.text);
    assert.deepEqual(Object.keys(proof.body).sort(), ['access_token', 'expiry']);
    assert.equal(Date.parse(proof.body.expiry), clock.now() + t.config.v1TokenTtlSeconds * 1000);
    const polled = await agent.poll();
    assert.equal(polled.status, 200, polled.text);
    assert.deepEqual(polled.body.items, []);
  });

  it('refuses a proof by another key, for another address, or made twice', async () => {
    const agent = new Uagents022Agent(t.url, TestIdentity.random());
    const other = TestIdentity.random();
    const prove = (address: string, challenge: string, signer: TestIdentity) =>
      call(t.url, 'POST', '/v1/auth/prove', {
        body: { address, challenge, challenge_response: signer.signChallenge(challenge) },
      });
    const first = (await agent.requestChallenge()).body.challenge;
    const byOther = await prove(agent.address, first, other);
    assert.equal(byOther.status, 400, byOther.text);
    assert.match(byOther.body.detail, /signature does not match/);

    const second = (await agent.requestChallenge()).body.challenge;
    const forOther = await prove(other.address, second, other);
    assert.equal(forOther.status, 400, forOther.text);
    assert.match(forOther.body.detail, /Invalid challenge/);
    // A challenge issued with a user's key is not the agent's.
    const users = (await agent.requestChallenge(t.userKey)).body.challenge;
    assert.equal((await prove(agent.address, users, agent.identity)).status, 400);

    assert.equal((await prove(agent.address, second, agent.identity)).status, 200);
    const replayed = await prove(agent.address, second, agent.identity);
    assert.equal(replayed.status, 400, replayed.text);
  });

  it('answers 401 to an expired or unknown token, and the client gets a new one', async () => {
    const agent = await connectedMailboxAgent();
    assert.equal((await agent.poll()).status, 200);
    const stale = agent.accessToken;
    clock.advance(t.config.v1TokenTtlSeconds * 1000);
    const expired = await agent.poll();
    assert.equal(expired.status, 401, expired.text);
    assert.match(expired.body.detail, /POST \/v1\/auth\/prove/);
    assert.equal(expired.headers.get('www-authenticate'), 'token');
    assert.equal(agent.accessToken, null);
    // The next turn of the loop fetches a new token.
    assert.equal((await agent.poll()).status, 200);
    assert.notEqual(agent.accessToken, stale);

    for (const authorization of ['token ' + 'A'.repeat(43), 'token nonsense', 'token']) {
      const res = await call(t.url, 'GET', '/v1/mailbox', { authorization });
      assert.equal(res.status, 401, `${authorization}: ${res.text}`);
    }
  });

  it('answers 404 to the token of an address no user registered, as the hosted service does', async () => {
    const agent = new Uagents022Agent(t.url, TestIdentity.random());
    assert.equal((await agent.getAccessToken()).status, 200);
    const res = await agent.poll();
    assert.equal(res.status, 404, res.text);
    assert.equal(res.body.detail, 'Agent mailbox not found');
    // Its owner connects it: the same token now reads the new mailbox.
    assert.equal((await agent.connect(t.userKey, 'mailbox', null)).success, true);
    assert.equal((await agent.poll()).status, 200);
  });

  it('delivers v1 submits to the v1 mailbox in the StoredEnvelope shape 0.22 parses', async () => {
    const agent = await connectedMailboxAgent();
    const sender = TestIdentity.random();
    const envelope = envelopeFrom(sender, agent.address, 'through v1');
    const submitted = await submit('/v1/submit', envelope);
    assert.equal(submitted.status, 200, submitted.text);
    assert.deepEqual(submitted.body, {});

    const res = await agent.poll();
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.items.length, 1);
    const [item] = res.body.items as StoredItem[];
    assert.deepEqual(Object.keys(item!), ['uuid', 'envelope', 'received_at', 'expires_at']);
    assert.equal(item!.uuid, messageUuid(envelope));
    assert.deepEqual(item!.envelope, envelope);
    assert.ok(Date.parse(item!.received_at) <= Date.parse(item!.expires_at));
    assert.equal(res.body.page, 1);

    const deleted = await agent.deleteEnvelope(item!.uuid);
    assert.equal(deleted.status, 200, deleted.text);
    assert.deepEqual((await agent.poll()).body.items, []);
    // Gone for v2 readers as well: one mailbox.
    const v2 = await call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
      key: t.userKey,
    });
    assert.deepEqual(v2.body, []);
  });

  it('delivers across versions: v1 submit to a v2 poll, v2 submit to the v1 mailbox', async () => {
    const sender = TestIdentity.random();
    const current = await newRegisteredAgent(hostOf(t), t.userKey);
    const toCurrent = envelopeFrom(sender, current.address, 'v1 to v2');
    assert.equal((await submit('/v1/submit', toCurrent)).status, 200);
    const polled = await call(t.url, 'GET', `/v2/agents/${current.address}/mailbox`, {
      authorization: current.authorization(clock.now()),
    });
    assert.equal(polled.status, 200, polled.text);
    assert.deepEqual(
      polled.body.map((item: StoredItem) => item.envelope),
      [toCurrent],
    );

    const legacy = await connectedMailboxAgent();
    const toLegacy = envelopeFrom(current, legacy.address, 'v2 to v1');
    assert.equal((await submit('/v2/agents/mailbox/submit', toLegacy)).status, 200);
    const received = await legacy.receive();
    assert.deepEqual(
      received.map((item) => item.envelope),
      [toLegacy],
    );
    // The 0.22 agent answers through v1, and the current one reads it through v2.
    const reply = envelopeFrom(legacy.identity, current.address, 'reply');
    assert.equal((await submit('/v1/submit', reply)).status, 200);
    const replies = await call(t.url, 'GET', `/v2/agents/${current.address}/mailbox`, {
      authorization: current.authorization(clock.now()),
    });
    assert.deepEqual(
      replies.body.map((item: StoredItem) => item.envelope),
      [toCurrent, reply],
    );
  });

  it('forwards a v1 proxy submit to the 0.22 proxy agent’s own endpoint', async () => {
    const agent = new Uagents022Agent(t.url, TestIdentity.random());
    const url = `${endpoint.url}/submit`;
    assert.equal((await agent.connect(t.userKey, 'proxy', url)).success, true);
    const listing = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
    assert.equal(listing.body.redirect_url, url);
    const probe = await call(t.url, 'GET', '/v1/proxy/submit', {
      headers: { 'x-uagents-address': agent.address },
    });
    assert.equal(probe.headers.get('x-uagents-status'), 'ready');

    const sender = TestIdentity.random();
    for (const path of ['/v1/proxy/submit', '/v2/agents/proxy/submit']) {
      const envelope = envelopeFrom(sender, agent.address, `by ${path}`);
      const before = endpoint.received.length;
      const res = await submit(path, envelope);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(JSON.parse(endpoint.received[before]!), envelope);
    }
    // Connected again as a mailbox agent, it has nowhere to forward to.
    assert.equal((await agent.connect(t.userKey, 'mailbox', null)).success, true);
    const unforwarded = await submit('/v1/proxy/submit', envelopeFrom(sender, agent.address, 'x'));
    assert.equal(unforwarded.status, 404, unforwarded.text);
  });

  it('reads and deletes only the token’s own agent’s messages', async () => {
    const alice = await connectedMailboxAgent();
    const mallory = await connectedMailboxAgent();
    const envelope = envelopeFrom(TestIdentity.random(), alice.address, 'for alice only');
    assert.equal((await submit('/v1/submit', envelope)).status, 200);
    assert.deepEqual((await mallory.poll()).body.items, []);
    const refused = await mallory.deleteEnvelope(messageUuid(envelope));
    assert.equal(refused.status, 404, refused.text);
    const items = (await alice.poll()).body.items as StoredItem[];
    assert.deepEqual(
      items.map((item) => item.uuid),
      [messageUuid(envelope)],
    );
    // Neither the owner's key nor the agent's attestation is a v1 token.
    for (const authorization of [
      `Bearer ${t.userKey}`,
      alice.identity.authorization(clock.now()),
    ]) {
      const res = await call(t.url, 'GET', '/v1/mailbox', { authorization });
      assert.equal(res.status, 401, res.text);
    }
  });

  it('lists and reads the user’s agents in the v1 shape, as the v1 agents client asks', async () => {
    const doraKey = await t.addUser('dora');
    const first = new Uagents022Agent(t.url, TestIdentity.random());
    await first.connect(doraKey, 'mailbox', null, {
      name: 'first',
      readme: '# First',
      avatarUrl: null,
    });
    // Listed oldest registration first.
    clock.advance(1000);
    const second = new Uagents022Agent(t.url, TestIdentity.random());
    await second.connect(doraKey, 'proxy', `${endpoint.url}/second`);
    const envelope = envelopeFrom(TestIdentity.random(), first.address, 'waiting');
    assert.equal((await submit('/v1/submit', envelope)).status, 200);
    const authorization = `Bearer ${doraKey}`;

    const listed = await clientCall(t.url, 'GET', '/v1/agents?page=1&size=50', { authorization });
    assert.equal(listed.status, 200, listed.text);
    const firstShape = {
      address: first.address,
      name: 'first',
      pending_messages: 1,
      bytes_transferred: 0,
      previous_bytes_transferred: 0,
      readme: '# First',
      avatar_url: null,
      short_description: null,
      agent_type: 'mailbox',
    };
    assert.deepEqual(listed.body, {
      items: [
        firstShape,
        {
          ...firstShape,
          address: second.address,
          name: `agent ${second.address.slice(-8)}`,
          pending_messages: 0,
          readme: null,
          agent_type: 'proxy',
        },
      ],
      total: null,
      page: 1,
      size: 50,
      pages: null,
    });
    const paged = await clientCall(t.url, 'GET', '/v1/agents?page=2&size=1', { authorization });
    assert.deepEqual(
      paged.body.items.map((agent: { address: string }) => agent.address),
      [second.address],
    );

    const one = await clientCall(t.url, 'GET', `/v1/agents/${first.address}`, { authorization });
    assert.equal(one.status, 200, one.text);
    assert.deepEqual(one.body, firstShape);
    // Another user's agent, or none at all, is not found.
    for (const [key, address] of [
      [bobKey, first.address],
      [doraKey, TestIdentity.random().address],
    ] as const) {
      const res = await clientCall(t.url, 'GET', `/v1/agents/${address}`, {
        authorization: `Bearer ${key}`,
      });
      assert.equal(res.status, 404, res.text);
    }
    for (const query of ['page=0', 'size=101', 'size=x']) {
      const res = await clientCall(t.url, 'GET', `/v1/agents?${query}`, { authorization });
      assert.equal(res.status, 422, `${query}: ${res.text}`);
      assert.equal(res.body.detail[0].loc[0], 'query');
    }
  });

  it('reads one message and deletes them all with the agent’s token, as the v1 mailbox client asks', async () => {
    const agent = await connectedMailboxAgent();
    const other = await connectedMailboxAgent();
    await agent.getAccessToken();
    await other.getAccessToken();
    const sender = TestIdentity.random();
    const envelopes = ['one', 'two'].map((text) => envelopeFrom(sender, agent.address, text));
    for (const envelope of envelopes)
      assert.equal((await submit('/v1/submit', envelope)).status, 200);
    const uuid = messageUuid(envelopes[0]!);
    const token = (who: Uagents022Agent) => ({ authorization: `token ${who.accessToken}` });

    const read = await clientCall(t.url, 'GET', `/v1/mailbox/${uuid}`, token(agent));
    assert.equal(read.status, 200, read.text);
    assert.equal(read.body.uuid, uuid);
    assert.deepEqual(read.body.envelope, envelopes[0]);
    assert.deepEqual(Object.keys(read.body), ['uuid', 'envelope', 'received_at', 'expires_at']);
    // Only the token's own agent reads it; neither the owner's key nor an attestation is a token.
    assert.equal((await clientCall(t.url, 'GET', `/v1/mailbox/${uuid}`, token(other))).status, 404);
    for (const authorization of [
      `Bearer ${t.userKey}`,
      agent.identity.authorization(clock.now()),
    ]) {
      const res = await clientCall(t.url, 'GET', `/v1/mailbox/${uuid}`, { authorization });
      assert.equal(res.status, 401, res.text);
    }
    const malformed = await clientCall(t.url, 'GET', '/v1/mailbox/not-a-uuid', token(agent));
    assert.equal(malformed.status, 422, malformed.text);
    assert.deepEqual(malformed.body.detail[0].loc, ['path', 'uuid']);

    // Another agent's delete-all leaves these messages alone.
    const othersDelete = await clientCall(t.url, 'DELETE', '/v1/mailbox', token(other));
    assert.equal(othersDelete.status, 200, othersDelete.text);
    assert.equal((await agent.poll()).body.items.length, 2);

    const deleted = await clientCall(t.url, 'DELETE', '/v1/mailbox', token(agent));
    assert.equal(deleted.status, 200, deleted.text);
    assert.deepEqual(deleted.body, {});
    assert.deepEqual((await agent.poll()).body.items, []);
    assert.equal((await clientCall(t.url, 'GET', `/v1/mailbox/${uuid}`, token(agent))).status, 404);
    const listing = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
    assert.deepEqual(listing.body.mailbox, { pending_messages: 0, bytes_stored: 0 });
    // Acknowledged, a message sent again is not delivered again.
    assert.equal((await submit('/v1/submit', envelopes[1]!)).status, 200);
    assert.deepEqual((await agent.poll()).body.items, []);
    const unauthenticated = await clientCall(t.url, 'DELETE', '/v1/mailbox');
    assert.equal(unauthenticated.status, 401, unauthenticated.text);
  });

  it('disconnects: the listing and mailbox go, and the token finds no mailbox', async () => {
    const agent = await connectedMailboxAgent();
    assert.equal((await agent.poll()).status, 200);
    const notOwner = await call(t.url, 'DELETE', `/v1/agents/${agent.address}`, { key: bobKey });
    assert.equal(notOwner.status, 404, notOwner.text);
    const res = await agent.disconnect(t.userKey);
    assert.equal(res.status, 200, res.text);
    assert.equal((await agent.poll()).status, 404);
    const listing = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
    assert.equal(listing.status, 404);
  });

  it('accepts a token on every replica of the database', async () => {
    const replica = await startTestServer({ replicaOf: t, clock });
    try {
      const agent = await connectedMailboxAgent();
      assert.equal((await agent.getAccessToken()).status, 200);
      const res = await call(replica.url, 'GET', '/v1/mailbox', {
        authorization: `token ${agent.accessToken}`,
      });
      assert.equal(res.status, 200, res.text);
    } finally {
      await replica.close();
    }
  });
});
