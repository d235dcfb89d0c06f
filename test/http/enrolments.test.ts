import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EnvelopeFields } from '../../src/crypto/index.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import { registerInAlmanac, signedStatusUpdate, unixSeconds } from '../kit/almanac.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';
import { flushPresence, ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/**
 * The agentverse-sdk's `AgentUri.from_str`, step by step as Python's `urlparse` reads it: the
 * user name is the handle and the password the key, both as written (not decoded); the host
 * and port make the base URL with the scheme; the first path segment, decoded, is the name.
 */
function parseAgentUri(uri: string) {
  const match = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)(\/[^?#]*)?(\?[^#]*)?/.exec(uri);
  assert.ok(match, `not a URI: ${uri}`);
  const [, scheme, netloc, path = ''] = match;
  const at = netloc!.lastIndexOf('@');
  assert.ok(at > 0, 'the URI has no user information');
  const userinfo = netloc!.slice(0, at);
  const colon = userinfo.indexOf(':');
  const handle = userinfo.slice(0, colon);
  const key = userinfo.slice(colon + 1);
  assert.ok(colon > 0 && handle && key, 'the URI has no handle or key');
  const segments = path.split('/');
  assert.ok(segments.length >= 2 && segments[1], 'the URI has no agent name');
  return {
    handle,
    key,
    name: decodeURIComponent(segments[1]!),
    baseUrl: `${scheme}://${netloc!.slice(at + 1).toLowerCase()}`,
    /** `Identity.from_seed(key, 0)`. */
    identity: TestIdentity.fromSeed(key, 0),
  };
}

/** `generate_agent_auth_token`: an attestation from now, for 120 s, as the sdk makes it. */
function sdkAuthorization(identity: TestIdentity): string {
  const now = Math.floor(Date.now() / 1000);
  return `Agent ${identity.attestation({ validFrom: now, validTo: now + 120 })}`;
}

/** The chat protocol's digest, as the sdk declares it. */
const CHAT_PROTOCOL = `proto:${'30a801ed3a83f9a0ff0a9f1e6fe958cb91da1fc2218b153df7b6cbf87bd33d62'}`;

/**
 * `RegistrationRequest.model_dump_json()` as the A2A bridge builds it from an agent card with
 * no icon and no documentation URL: every field present, the unset ones null.
 */
function sdkRegistration(uri: ReturnType<typeof parseAgentUri>, chatUrl: string) {
  return {
    address: uri.identity.address,
    name: uri.name,
    handle: uri.handle,
    url: null,
    agent_type: 'a2a',
    profile: {
      description: 'Answers questions about the weather',
      readme: '\n# Weather\nAnswers questions about the weather\n',
      avatar_url: null,
      banner_url: '',
    },
    endpoints: [{ url: chatUrl, weight: 1 }],
    protocols: [CHAT_PROTOCOL],
    metadata: null,
  };
}

/** The A2A bridge's own server: records each envelope posted to `/av/chat` and answers `{}`. */
async function startBridge() {
  const received: EnvelopeFields[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.url === '/av/chat' && request.method === 'POST') {
        received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as EnvelopeFields);
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const url = await listenOnLoopback(server);
  return { url, received, close: () => closeNow(server) };
}

function chatEnvelope(
  from: TestIdentity,
  to: string,
  text: string,
  session: string = randomUUID(),
): EnvelopeFields {
  return from.signEnvelope({
    ...makeEnvelope({
      sender: from.address,
      target: to,
      payloadJson: JSON.stringify({
        timestamp: new Date().toISOString(),
        msg_id: randomUUID(),
        content: [{ type: 'text', text }],
      }),
      protocolDigest: CHAT_PROTOCOL,
      nonce: Math.floor(Math.random() * 1e9),
    }),
    session,
  });
}

const payloadText = (envelope: EnvelopeFields): string =>
  JSON.parse(Buffer.from(envelope.payload!, 'base64').toString('utf8')).content[0].text;

/** The sdk's lifespan event (`POST /v1/events`), "Agent Started" or "Agent Stopped". */
function lifespanEvent(baseUrl: string, identity: TestIdentity, message: string) {
  return call(baseUrl, 'POST', '/v1/events', {
    authorization: sdkAuthorization(identity),
    body: {
      platform: {
        operating_system: { name: 'Linux', version: '#1 SMP', release: '6.1.0' },
        python_version: '3.12.3',
        processor: 'x86_64',
        nodename: 'bridge-host',
        sdk_version: '0.4.9',
      },
      events: [
        {
          id: randomUUID(),
          category: 'user',
          kind: 'info',
          timestamp: new Date().toISOString(),
          exception: null,
          traceback: null,
          metadata: null,
          message,
        },
      ],
    },
  });
}

/** The sdk's signed Almanac status (an AgentStatusUpdate of the bare address). */
function sdkStatus(baseUrl: string, identity: TestIdentity, active: boolean) {
  return call(baseUrl, 'POST', `/v1/almanac/agents/${identity.address}/status`, {
    body: signedStatusUpdate(identity, {
      active,
      timestamp: unixSeconds(Date.now()),
      prefix: null,
    }),
  });
}

/**
 * What every reader says of an agent: its status (its owner's view), the Search API's status
 * and type, whether the `active` state filter keeps it, the Almanac's status, and the status of
 * its record in a search by protocol (what uAgents' broadcast asks), or null when not found.
 */
async function whatIsSaid(t: TestServer, key: string, address: string, protocol: string) {
  const owned = await call(t.url, 'GET', `/v2/agents/${address}`, { key });
  assert.equal(owned.status, 200, owned.text);
  const searched = await call(t.url, 'POST', '/v1/search/agents', {
    body: { search_text: `address:${address}` },
  });
  assert.equal(searched.status, 200, searched.text);
  const filtered = await call(t.url, 'POST', '/v1/search/agents', {
    body: { search_text: `address:${address}`, filters: { state: ['active'] } },
  });
  assert.equal(filtered.status, 200, filtered.text);
  const resolved = await call(t.url, 'GET', `/v1/almanac/agents/${address}`);
  assert.equal(resolved.status, 200, resolved.text);
  const broadcast = await call(t.url, 'POST', '/v1/almanac/search', {
    body: { text: protocol.slice('proto:'.length) },
  });
  assert.equal(broadcast.status, 200, broadcast.text);
  const record = broadcast.body.find((r: { address: string }) => r.address === address);
  return {
    status: owned.body.status.status as string,
    search: `${searched.body.agents[0]?.status} ${searched.body.agents[0]?.type}`,
    activeFilter: filtered.body.agents.length,
    almanac: resolved.body.status as string,
    broadcast: (record?.status as string | undefined) ?? null,
  };
}

describeOnEachDialect('agents provisioned with an Agent URI (agentverse-sdk)', (dialect) => {
  let t: TestServer;
  let bridge: Awaited<ReturnType<typeof startBridge>>;
  let bobKey: string;

  before(async () => {
    bridge = await startBridge();
    t = await startTestServer({ dialect, config: { allowPrivateTargets: true } });
    bobKey = await t.addUser('bob');
  });
  after(async () => {
    await t.close();
    await bridge.close();
  });

  async function provision(body: Record<string, unknown>, key = t.userKey) {
    return call(t.url, 'POST', '/v2/enrolments', { key, body });
  }

  it('issues an Agent URI whose agent registers, sets its status, receives and answers', async () => {
    const issued = await provision({ name: 'Weather Bridge' });
    assert.equal(issued.status, 200, issued.text);
    const uri = parseAgentUri(issued.body.agent_uri);
    assert.equal(uri.baseUrl, t.config.publicUrl);
    assert.equal(uri.name, 'Weather Bridge');
    assert.match(uri.handle, /^weather-bridge-[a-z2-7]{6}$/);
    assert.match(uri.key, /^[0-9a-f]{64}$/);
    assert.equal(issued.body.address, uri.identity.address);
    assert.equal(issued.body.handle, uri.handle);

    // The key is shown once: the list has the address, never the key.
    const listed = await call(t.url, 'GET', '/v2/enrolments', { key: t.userKey });
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(
      listed.body.map((e: { address: string }) => e.address),
      [uri.identity.address],
    );
    assert.ok(!listed.text.includes(uri.key));

    // Start-up: POST /v2/agents under its own attestation, no user key.
    const chatUrl = `${bridge.url}/av/chat`;
    const registered = await fetch(`${uri.baseUrl}/v2/agents`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: sdkAuthorization(uri.identity),
      },
      body: JSON.stringify(sdkRegistration(uri, chatUrl)),
    });
    assert.equal(registered.status, 200, await registered.text());

    // The owner sees it among their agents.
    const owned = await call(t.url, 'GET', `/v2/agents/${uri.identity.address}`, {
      key: t.userKey,
    });
    assert.equal(owned.status, 200, owned.text);
    assert.equal(owned.body.name, 'Weather Bridge');
    assert.equal(owned.body.agent_type, 'a2a');
    assert.equal(owned.body.handle, uri.handle);
    assert.equal(owned.body.profile.avatar_url, '');
    // Telemetry's gate: the agent reads its own record.
    const own = await call(t.url, 'GET', `/v2/agents/${uri.identity.address}`, {
      authorization: sdkAuthorization(uri.identity),
    });
    assert.equal(own.status, 200, own.text);

    // The lifespan: status active (an AgentStatusUpdate of the bare address), then an event.
    const status = await call(t.url, 'POST', `/v1/almanac/agents/${uri.identity.address}/status`, {
      body: signedStatusUpdate(uri.identity, {
        active: true,
        timestamp: unixSeconds(Date.now()),
        prefix: null,
      }),
    });
    assert.equal(status.status, 200, status.text);
    const started = await call(t.url, 'POST', '/v1/events', {
      authorization: sdkAuthorization(uri.identity),
      body: {
        platform: {
          operating_system: { name: 'Linux', version: '#1 SMP', release: '6.1.0' },
          python_version: '3.12.3',
          processor: 'x86_64',
          nodename: 'bridge-host',
          sdk_version: '0.4.9',
        },
        events: [
          {
            id: randomUUID(),
            category: 'user',
            kind: 'info',
            timestamp: new Date().toISOString(),
            exception: null,
            traceback: null,
            metadata: null,
            message: 'Agent Started',
          },
        ],
      },
    });
    assert.equal(started.status, 200, started.text);

    // A uAgent of Bob's, a mailbox agent in the Almanac, finds the bridge and writes to it.
    const sender = TestIdentity.random();
    await registerAgent(hostOf(t), bobKey, sender);
    await registerInAlmanac(t.url, sender, {
      timestamp: unixSeconds(Date.now()),
      endpoints: [{ url: `${t.config.publicUrl}/v2/agents/mailbox/submit`, weight: 1 }],
    });
    const resolved = await call(t.url, 'GET', `/v1/almanac/agents/${uri.identity.address}`);
    assert.equal(resolved.status, 200, resolved.text);
    assert.equal(resolved.body.status, 'active');
    assert.deepEqual(
      resolved.body.endpoints.map((e: { url: string }) => e.url),
      [chatUrl],
    );
    assert.deepEqual(resolved.body.protocols, [CHAT_PROTOCOL]);
    const question = chatEnvelope(sender, uri.identity.address, 'Will it rain?');
    const delivered = await fetch(resolved.body.endpoints[0].url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(question),
    });
    assert.equal(delivered.status, 200);
    const got = bridge.received.at(-1)!;
    assert.equal(got.target, uri.identity.address);
    assert.equal(payloadText(got), 'Will it rain?');

    // A message left in its mailbox (opened at registration) it collects with its attestation.
    const kept = chatEnvelope(sender, uri.identity.address, 'And tomorrow?');
    const submitted = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: kept });
    assert.equal(submitted.status, 200, submitted.text);
    const mailbox = await call(t.url, 'GET', `/v2/agents/${uri.identity.address}/mailbox`, {
      authorization: sdkAuthorization(uri.identity),
    });
    assert.equal(mailbox.status, 200, mailbox.text);
    assert.equal(mailbox.body.length, 1);
    assert.equal(payloadText(mailbox.body[0].envelope), 'And tomorrow?');
    const removed = await call(
      t.url,
      'DELETE',
      `/v2/agents/${uri.identity.address}/mailbox/${mailbox.body[0].uuid}`,
      { authorization: sdkAuthorization(uri.identity) },
    );
    assert.equal(removed.status, 200, removed.text);

    // The answer: the bridge resolves the sender and posts a reply signed with its own key.
    const senderRecord = await call(t.url, 'GET', `/v1/almanac/agents/${sender.address}`);
    assert.equal(senderRecord.status, 200, senderRecord.text);
    const reply = chatEnvelope(uri.identity, sender.address, 'Sunny both days.', got.session);
    const answered = await fetch(senderRecord.body.endpoints[0].url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(reply),
    });
    assert.equal(answered.status, 200, await answered.text());
    const inbox = await call(t.url, 'GET', `/v2/agents/${sender.address}/mailbox`, {
      authorization: sender.authorization(),
    });
    assert.equal(inbox.status, 200, inbox.text);
    const answer = inbox.body.at(-1).envelope as EnvelopeFields;
    assert.equal(answer.sender, uri.identity.address);
    assert.equal(answer.session, got.session);
    assert.equal(payloadText(answer), 'Sunny both days.');
    assert.equal(answer.signature, reply.signature);

    // It updates itself too (PUT with its attestation), and the owner sees the change.
    const updated = await call(t.url, 'PUT', `/v2/agents/${uri.identity.address}`, {
      authorization: sdkAuthorization(uri.identity),
      body: { address: uri.identity.address, name: 'Weather Bridge 2' },
    });
    assert.equal(updated.status, 200, updated.text);
    const renamed = await call(t.url, 'GET', `/v2/agents/${uri.identity.address}`, {
      key: t.userKey,
    });
    assert.equal(renamed.body.name, 'Weather Bridge 2');
  });

  it('says one thing of a running bridge everywhere, and keeps its stop when it reports "Agent Stopped"', async () => {
    const issued = await provision({ name: 'Truthful Bridge' });
    const uri = parseAgentUri(issued.body.agent_uri);
    const { address } = uri.identity;
    const registered = await call(t.url, 'POST', '/v2/agents', {
      authorization: sdkAuthorization(uri.identity),
      body: sdkRegistration(uri, `${bridge.url}/av/chat`),
    });
    assert.equal(registered.status, 200, registered.text);
    // Start-up as the sdk does it: status active, then "Agent Started".
    assert.equal((await sdkStatus(t.url, uri.identity, true)).status, 200);
    assert.equal((await lifespanEvent(t.url, uri.identity, 'Agent Started')).status, 200);
    await flushPresence(t);
    assert.deepEqual(await whatIsSaid(t, t.userKey, address, CHAT_PROTOCOL), {
      status: 'active',
      search: 'active a2a',
      activeFilter: 1,
      almanac: 'active',
      broadcast: 'active',
    });

    // Stop as the sdk does it: status inactive, then "Agent Stopped" 0.3 s later.
    assert.equal((await sdkStatus(t.url, uri.identity, false)).status, 200);
    await sleep(300);
    assert.equal((await lifespanEvent(t.url, uri.identity, 'Agent Stopped')).status, 200);
    const stopped = {
      status: 'offline',
      search: 'inactive a2a',
      activeFilter: 0,
      almanac: 'inactive',
      broadcast: 'inactive',
    };
    // Before and after the presence it saw is written, and after the timer's own flush.
    assert.deepEqual(await whatIsSaid(t, t.userKey, address, CHAT_PROTOCOL), stopped);
    await flushPresence(t);
    assert.deepEqual(await whatIsSaid(t, t.userKey, address, CHAT_PROTOCOL), stopped);
    await sleep(1200);
    assert.deepEqual(await whatIsSaid(t, t.userKey, address, CHAT_PROTOCOL), stopped);
    const timeline = await call(t.url, 'GET', `/v2/agents/${address}/activity?kind=status`, {
      key: t.userKey,
    });
    assert.equal(timeline.body.entries[0].data.to, 'offline', timeline.text);

    // Started again: active everywhere again.
    await sleep(1000); // a status update signed in a later second than the stop
    assert.equal((await sdkStatus(t.url, uri.identity, true)).status, 200);
    assert.equal((await lifespanEvent(t.url, uri.identity, 'Agent Started')).status, 200);
    await flushPresence(t);
    assert.deepEqual(await whatIsSaid(t, t.userKey, address, CHAT_PROTOCOL), {
      status: 'active',
      search: 'active a2a',
      activeFilter: 1,
      almanac: 'active',
      broadcast: 'active',
    });
  });

  it('refuses to enrol a handle another agent holds or was enrolled with, and keeps an enrolled handle', async () => {
    const handle = `kept-${randomBytes(3).toString('hex')}`;
    const first = await provision({ name: 'First Holder', handle });
    assert.equal(first.status, 200, first.text);
    // Another URI for the same handle could never register: refused when it is asked for.
    const second = await provision({ name: 'Second Holder', handle });
    assert.equal(second.status, 409, second.text);
    assert.match(second.body.detail, /already taken/);
    const bobs = await provision({ name: 'Bob Holder', handle }, bobKey);
    assert.equal(bobs.status, 409, bobs.text);
    // The same enrolment again (the same seed) keeps its handle.
    const seed = `seed-${randomBytes(12).toString('hex')}`;
    const own = `own-${randomBytes(3).toString('hex')}`;
    assert.equal((await provision({ name: 'Mine', handle: own, seed })).status, 200);
    assert.equal((await provision({ name: 'Mine again', handle: own, seed })).status, 200);

    // A handle a registered agent holds is refused too.
    const held = `held-${randomBytes(3).toString('hex')}`;
    const agent = TestIdentity.random();
    await registerAgent(hostOf(t), bobKey, agent);
    const named = await call(t.url, 'PUT', `/v2/agents/${agent.address}`, {
      key: bobKey,
      body: { address: agent.address, handle: held },
    });
    assert.equal(named.status, 200, named.text);
    const taken = await provision({ name: 'Held', handle: held });
    assert.equal(taken.status, 409, taken.text);

    // And another agent may not take the handle of an enrolment that has not registered yet.
    const grab = await call(t.url, 'PUT', `/v2/agents/${agent.address}`, {
      key: bobKey,
      body: { address: agent.address, handle },
    });
    assert.equal(grab.status, 409, grab.text);
    // The enrolled agent registers under it.
    const uri = parseAgentUri(first.body.agent_uri);
    const registered = await call(t.url, 'POST', '/v2/agents', {
      authorization: sdkAuthorization(uri.identity),
      body: sdkRegistration(uri, `${bridge.url}/av/chat`),
    });
    assert.equal(registered.status, 200, registered.text);
  });

  it('lets one of two provisions of one handle at the same instant enrol it, and refuses the other with 409', async () => {
    for (let round = 0; round < 5; round++) {
      const handle = `race-${round}-${randomBytes(3).toString('hex')}`;
      const answers = await Promise.all(
        [0, 1, 2].map(() => provision({ name: 'Racing Bridge', handle })),
      );
      assert.deepEqual(
        answers.map((res) => res.status).sort(),
        [200, 409, 409],
        answers.map((res) => res.text).join('\n'),
      );
      for (const refused of answers.filter((res) => res.status === 409)) {
        assert.match(refused.body.detail, /is already taken by another agent/);
      }
      const enrolled = await call(t.url, 'GET', '/v2/enrolments?limit=1000', { key: t.userKey });
      assert.equal(
        enrolled.body.filter((e: { handle: string }) => e.handle === handle).length,
        1,
        enrolled.text,
      );
    }
  });

  it('refuses an agent nobody enrolled with 403 saying how to enrol it', async () => {
    const stranger = TestIdentity.random();
    const uri = {
      identity: stranger,
      name: 'Stray',
      handle: `stray-${randomBytes(3).toString('hex')}`,
    } as ReturnType<typeof parseAgentUri>;
    const res = await call(t.url, 'POST', '/v2/agents', {
      authorization: sdkAuthorization(stranger),
      body: sdkRegistration(uri, `${bridge.url}/av/chat`),
    });
    assert.equal(res.status, 403, res.text);
    assert.match(res.body.detail, /not enrolled/);
    assert.match(res.body.detail, /POST \/v2\/enrolments/);
    assert.match(res.body.detail, /agentry agents provision/);
    const update = await call(t.url, 'PUT', `/v2/agents/${stranger.address}`, {
      authorization: sdkAuthorization(stranger),
      body: { address: stranger.address, name: 'Stray' },
    });
    assert.equal(update.status, 403, update.text);
    // Nor may an agent register another one, enrolled or not.
    const other = await provision({ name: 'Other' });
    const impostor = await call(t.url, 'POST', '/v2/agents', {
      authorization: sdkAuthorization(stranger),
      body: { address: other.body.address, name: 'Other' },
    });
    assert.equal(impostor.status, 403, impostor.text);
    assert.match(impostor.body.detail, /does not belong/);
    // Nothing nobody enrolled resolves from a listing.
    const resolved = await call(t.url, 'GET', `/v1/almanac/agents/${stranger.address}`);
    assert.equal(resolved.status, 404, resolved.text);
  });

  it('takes a key the owner brings, and refuses one held by another account or that a URI cannot carry', async () => {
    const seed = `my-own-seed.${randomBytes(8).toString('hex')}`;
    const mine = await provision({
      name: 'Own Key',
      handle: `own-${randomBytes(3).toString('hex')}`,
      seed,
    });
    assert.equal(mine.status, 200, mine.text);
    const uri = parseAgentUri(mine.body.agent_uri);
    assert.equal(uri.key, seed);
    assert.equal(mine.body.address, TestIdentity.fromSeed(seed, 0).address);
    // Again by the same owner: renamed, the same address.
    const again = await provision({ name: 'Own Key 2', seed });
    assert.equal(again.status, 200, again.text);
    assert.equal(again.body.address, mine.body.address);
    // Bob may not take Alice's agent.
    const bobs = await provision({ name: 'Mine now', seed }, bobKey);
    assert.equal(bobs.status, 409, bobs.text);
    assert.match(bobs.body.detail, /another account/);
    // An address Bob proved (and registered) is his, even before anyone enrolled it.
    const provenSeed = `bob proven ${randomUUID()}`.replace(/ /g, '-');
    const proven = TestIdentity.fromSeed(provenSeed);
    await registerAgent(hostOf(t), bobKey, proven);
    const taken = await provision({ name: 'Taken', seed: provenSeed });
    assert.equal(taken.status, 409, taken.text);
    // A seed with characters the client would not decode is refused.
    for (const bad of ['has spaces in it, sadly', 'short', 'a:b@c/d?e#fghijklmnop']) {
      const res = await provision({ name: 'Bad', seed: bad });
      assert.equal(res.status, 422, `${bad}: ${res.text}`);
      assert.equal(res.body.detail[0].loc.join('.'), 'body.seed');
    }
  });

  it('stops self-registration when the enrolment ends, and leaves the listing', async () => {
    const issued = await provision({ name: 'Short Lived' });
    const uri = parseAgentUri(issued.body.agent_uri);
    const register = () =>
      call(t.url, 'POST', '/v2/agents', {
        authorization: sdkAuthorization(uri.identity),
        body: sdkRegistration(uri, `${bridge.url}/av/chat`),
      });
    assert.equal((await register()).status, 200);
    const ended = await call(t.url, 'DELETE', `/v2/enrolments/${uri.identity.address}`, {
      key: t.userKey,
    });
    assert.equal(ended.status, 200, ended.text);
    const refused = await register();
    assert.equal(refused.status, 403, refused.text);
    const listing = await call(t.url, 'GET', `/v2/agents/${uri.identity.address}`, {
      key: t.userKey,
    });
    assert.equal(listing.status, 200, listing.text);
    // Bob cannot end Alice's enrolments; an enrolment ended is gone.
    const other = await provision({ name: 'Kept' });
    const bobs = await call(t.url, 'DELETE', `/v2/enrolments/${other.body.address}`, {
      key: bobKey,
    });
    assert.equal(bobs.status, 404, bobs.text);
    const twice = await call(t.url, 'DELETE', `/v2/enrolments/${uri.identity.address}`, {
      key: t.userKey,
    });
    assert.equal(twice.status, 404, twice.text);
  });

  it('lets a key limited to one agent connect that agent, as the inspector does, and nothing else', async () => {
    const agent = TestIdentity.random();
    const made = await call(t.url, 'POST', '/v2/api-keys', {
      key: t.userKey,
      body: {
        label: `connect ${agent.address}`,
        expires_in_seconds: 300,
        addresses: [agent.address.toUpperCase()],
      },
    });
    assert.equal(made.status, 200, made.text);
    assert.deepEqual(made.body.addresses, [agent.address]);
    assert.equal(made.body.read_only, false);
    const key = made.body.key as string;
    // What a uAgent's /connect does with the key: challenge, proof, registration.
    await registerAgent(hostOf(t), key, agent);
    // Any other agent, or anything about no agent, is refused.
    const other = TestIdentity.random();
    const challenge = await call(t.url, 'GET', `/v2/identity/${other.address}/challenge`, { key });
    assert.equal(challenge.status, 403, challenge.text);
    assert.match(challenge.body.detail, /limited to one agent/);
    for (const [method, path] of [
      ['GET', '/v2/agents'],
      ['GET', '/v2/api-keys'],
      ['POST', '/v2/api-keys'],
      ['GET', '/v2/enrolments'],
    ] as const) {
      const res = await call(t.url, method, path, {
        key,
        body: method === 'POST' ? {} : undefined,
      });
      assert.equal(res.status, 403, `${method} ${path}: ${res.text}`);
    }
    // The key list shows each key's scope.
    const listed = await call(t.url, 'GET', '/v2/api-keys', { key: t.userKey });
    const shown = listed.body.find((k: { id: string }) => k.id === made.body.id);
    assert.deepEqual([shown.read_only, shown.addresses], [false, [agent.address]]);
    const full = listed.body.find((k: { current: boolean }) => k.current);
    assert.deepEqual([full.read_only, full.addresses], [false, null]);
    // A read-only key limited to the agent reads it, and changes nothing.
    const reader = await call(t.url, 'POST', '/v2/api-keys', {
      key: t.userKey,
      body: { read_only: true, addresses: [agent.address] },
    });
    const readKey = reader.body.key as string;
    const read = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: readKey });
    assert.equal(read.status, 200, read.text);
    const removal = await call(t.url, 'DELETE', `/v2/agents/${agent.address}`, { key: readKey });
    assert.equal(removal.status, 403, removal.text);
    assert.match(removal.body.detail, /read-only/);
    // Limits are checked as given.
    for (const addresses of [
      [],
      Array.from({ length: 101 }, () => TestIdentity.random().address),
    ]) {
      const res = await call(t.url, 'POST', '/v2/api-keys', {
        key: t.userKey,
        body: { addresses },
      });
      assert.equal(res.status, 422, res.text);
    }
  });

  it("counts a self-registered agent against its owner's agent quota", async () => {
    const limited = await startTestServer({
      dialect,
      config: { quotas: { ...t.config.quotas, agents: 1 } },
    });
    try {
      const uris = [];
      for (const name of ['First', 'Second']) {
        const res = await call(limited.url, 'POST', '/v2/enrolments', {
          key: limited.userKey,
          body: { name },
        });
        uris.push(parseAgentUri(res.body.agent_uri));
      }
      const outcomes = [];
      for (const uri of uris) {
        const res = await call(limited.url, 'POST', '/v2/agents', {
          authorization: sdkAuthorization(uri.identity),
          body: sdkRegistration(uri, `${bridge.url}/av/chat`),
        });
        outcomes.push(res.status);
      }
      assert.deepEqual(outcomes, [200, 406]);
    } finally {
      await limited.close();
    }
  });
});

describeOnEachDialect('a bridge seen only through its events', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  let bridge: Awaited<ReturnType<typeof startBridge>>;

  before(async () => {
    bridge = await startBridge();
    t = await startTestServer({ dialect, clock, config: { allowPrivateTargets: true } });
  });
  after(async () => {
    await t.close();
    await bridge.close();
  });

  it('stays active everywhere through a long silence, its listing being its current Almanac record', async () => {
    const issued = await call(t.url, 'POST', '/v2/enrolments', {
      key: t.userKey,
      body: { name: 'Quiet Bridge' },
    });
    assert.equal(issued.status, 200, issued.text);
    const uri = parseAgentUri(issued.body.agent_uri);
    const { address } = uri.identity;
    const registered = await call(t.url, 'POST', '/v2/agents', {
      authorization: sdkAuthorization(uri.identity),
      body: sdkRegistration(uri, `${bridge.url}/av/chat`),
    });
    assert.equal(registered.status, 200, registered.text);
    assert.equal((await sdkStatus(t.url, uri.identity, true)).status, 200);
    assert.equal((await lifespanEvent(t.url, uri.identity, 'Agent Started')).status, 200);
    await flushPresence(t);
    const running = {
      search: 'active a2a',
      activeFilter: 1,
      almanac: 'active',
      broadcast: 'active',
    };
    assert.deepEqual(await whatIsSaid(t, t.userKey, address, CHAT_PROTOCOL), {
      status: 'active',
      ...running,
    });

    // Nothing for longer than AGENTRY_AGENT_IDLE_SECONDS (65 min): it never polls, never
    // registers in the Almanac, and its listing is still its current record. Its status says it
    // was not seen lately, and, as the Almanac and search, that it is there.
    clock.advance(66 * 60_000);
    await t.server.ctx.services.activity.sweep();
    const quiet = await call(t.url, 'GET', `/v2/agents/${address}`, { key: t.userKey });
    assert.deepEqual(
      { status: quiet.body.status.status, reason: quiet.body.status.reason },
      { status: 'idle', reason: 'not seen lately' },
    );
    assert.deepEqual(await whatIsSaid(t, t.userKey, address, CHAT_PROTOCOL), {
      status: 'idle',
      ...running,
    });
    const changes = await call(t.url, 'GET', `/v2/agents/${address}/activity?kind=status`, {
      key: t.userKey,
    });
    assert.ok(
      !changes.body.entries.some((e: { data: { to: string } }) => e.data.to === 'offline'),
      changes.text,
    );
  });
});

describeOnEachDialect('open self-registration', (dialect) => {
  let t: TestServer;

  before(async () => {
    t = await startTestServer({ dialect, config: { openAgentRegistration: 'carol' } });
  });
  after(() => t.close());

  it('files an agent nobody enrolled under the chosen user, and enrols it to them', async () => {
    const carolKey = await t.addUser('carol');
    const agent = TestIdentity.random();
    const res = await call(t.url, 'POST', '/v2/agents', {
      authorization: sdkAuthorization(agent),
      body: { address: agent.address, name: 'Walk-in', agent_type: 'a2a' },
    });
    assert.equal(res.status, 200, res.text);
    const owned = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: carolKey });
    assert.equal(owned.status, 200, owned.text);
    const enrolled = await call(t.url, 'GET', '/v2/enrolments', { key: carolKey });
    assert.deepEqual(
      enrolled.body.map((e: { address: string; name: string }) => [e.address, e.name]),
      [[agent.address, 'Walk-in']],
    );
    // Not the bootstrap user's.
    const other = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
    assert.equal(other.status, 404, other.text);
  });

  it('is off by default', async () => {
    const closed = await startTestServer({ dialect });
    try {
      const agent = TestIdentity.random();
      const res = await call(closed.url, 'POST', '/v2/agents', {
        authorization: sdkAuthorization(agent),
        body: { address: agent.address, name: 'Walk-in' },
      });
      assert.equal(res.status, 403, res.text);
    } finally {
      await closed.close();
    }
  });
});

describe('Agent URIs', () => {
  it('parse back to the identity Agentry enrolled, as the client derives it', async () => {
    const t = await startTestServer({ config: { publicUrl: 'https://agentry.example.com:8443' } });
    try {
      const res = await call(t.url, 'POST', '/v2/enrolments', {
        key: t.userKey,
        body: { name: 'Ünïcode name/with slash' },
      });
      assert.equal(res.status, 200, res.text);
      const uri = parseAgentUri(res.body.agent_uri);
      assert.equal(uri.baseUrl, 'https://agentry.example.com:8443');
      assert.equal(uri.name, 'Ünïcode name/with slash');
      assert.match(uri.handle, /^unicode-name-with-slash-[a-z2-7]{6}$/);
      assert.equal(uri.identity.address, res.body.address);
    } finally {
      await t.close();
    }
  });
});
