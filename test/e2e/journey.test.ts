import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server as HttpServer } from 'node:http';
import {
  createNodeVerifier,
  verifyEnvelopeSignature,
  type EnvelopeFields,
} from '../../src/crypto/index.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';

/**
 * The journeys a uAgent makes against the service, played with a client that signs exactly
 * like uAgents (keys from seeds, high-s signatures half the time) and checks answers the way
 * the uAgents client does.
 */

const UUID4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const PYTHON_ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?\+00:00$/;
const verifier = createNodeVerifier();

/** What uAgents' StoredEnvelope model and `Envelope.verify()` demand of a mailbox item. */
function assertUagentsAccepts(item: Record<string, unknown>): EnvelopeFields {
  assert.match(String(item.uuid), UUID4);
  assert.match(String(item.received_at), PYTHON_ISO);
  assert.match(String(item.expires_at), PYTHON_ISO);
  const envelope = item.envelope as EnvelopeFields;
  assert.match(envelope.session, UUID4);
  assert.ok(verifyEnvelopeSignature(verifier, envelope), 'the recipient verifies the sender');
  return envelope;
}

function payloadOf(envelope: EnvelopeFields): unknown {
  return JSON.parse(Buffer.from(envelope.payload ?? '', 'base64').toString('utf8'));
}

describeOnEachDialect('uAgents journeys', (dialect) => {
  let t: TestServer;
  let endpoint: HttpServer;
  let endpointUrl: string;
  const alice = TestIdentity.fromSeed('agentry journey alice seed phrase');
  const bob = TestIdentity.fromSeed('agentry journey bob seed phrase');
  const carol = TestIdentity.fromSeed('agentry journey carol seed phrase');
  const atCarol: { headers: Record<string, string | string[] | undefined>; body: string }[] = [];

  before(async () => {
    // Carol runs her own HTTP endpoint; in sync mode she answers with a signed reply.
    endpoint = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        atCarol.push({ headers: request.headers, body });
        const incoming = JSON.parse(body) as EnvelopeFields;
        if (request.headers['x-uagents-connection'] !== 'sync') {
          response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
          return;
        }
        const reply = carol.signEnvelope({
          ...makeEnvelope({
            sender: carol.address,
            target: incoming.sender,
            payloadJson: '{"text":"pong"}',
          }),
          session: incoming.session,
        });
        response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(reply));
      });
    });
    endpointUrl = `${await listenOnLoopback(endpoint)}/submit`;
    t = await startTestServer({ dialect, config: { allowPrivateTargets: true } });
  });
  after(async () => {
    await t.close();
    await closeNow(endpoint);
  });

  it('delivers through the mailbox: register, submit, poll with one attestation, delete', async () => {
    await registerAgent(hostOf(t), t.userKey, alice);
    const usage = async () => {
      const res = await call(t.url, 'GET', '/v2/agents/usage/current', { key: t.userKey });
      assert.equal(res.status, 200, res.text);
      return res.body;
    };
    const usageBefore = await usage();

    // Bob sends as uAgents does: expires 30 s ahead, a nonce, a fresh session.
    const now = Math.floor(Date.now() / 1000);
    const sent = bob.signEnvelope(
      makeEnvelope({
        sender: bob.address,
        target: alice.address,
        payloadJson: '{"text":"hello alice"}',
        expires: now + 30,
        nonce: 1,
      }),
    );
    const submitted = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: sent });
    assert.equal(submitted.status, 200, submitted.text);

    // Alice's mailbox client keeps one attestation for ~1000 s and polls with it.
    const authorization = `Agent ${alice.attestation({ validFrom: now, validTo: now + 1000 })}`;
    const poll = () => call(t.url, 'GET', `/v2/agents/${alice.address}/mailbox`, { authorization });
    const first = await poll();
    assert.equal(first.status, 200, first.text);
    assert.equal(first.body.length, 1);
    const received = assertUagentsAccepts(first.body[0]);
    assert.deepEqual(received, sent);
    assert.deepEqual(payloadOf(received), { text: 'hello alice' });

    const acknowledged = await call(
      t.url,
      'DELETE',
      `/v2/agents/${alice.address}/mailbox/${first.body[0].uuid}`,
      { authorization },
    );
    assert.equal(acknowledged.status, 200);
    const next = await poll();
    assert.equal(next.status, 200);
    assert.deepEqual(next.body, [], 'an acknowledged message is not delivered again');

    const usageAfter = await usage();
    const size = Buffer.byteLength(JSON.stringify(sent));
    assert.equal(usageAfter.num_messages, usageBefore.num_messages + 1);
    assert.equal(usageAfter.bytes_transferred, usageBefore.bytes_transferred + size);
    assert.equal(usageAfter.bytes_stored, usageBefore.bytes_stored);
  });

  it('delivers through the proxy to the agent’s own endpoint, plain and sync', async () => {
    await registerAgent(hostOf(t), t.userKey, carol, { redirectUrl: endpointUrl });
    const probe = await call(t.url, 'HEAD', '/v2/agents/proxy/submit', {
      headers: { 'x-uagents-address': carol.address },
    });
    assert.equal(probe.headers.get('x-uagents-status'), 'ready');

    const plain = bob.signEnvelope(
      makeEnvelope({ sender: bob.address, target: carol.address, payloadJson: '{"n":1}' }),
    );
    const forwarded = await call(t.url, 'POST', '/v2/agents/proxy/submit', { body: plain });
    assert.equal(forwarded.status, 200, forwarded.text);
    assert.deepEqual(forwarded.body, {});
    const delivered = JSON.parse(atCarol.at(-1)!.body) as EnvelopeFields;
    assert.deepEqual(delivered, plain);
    assert.ok(verifyEnvelopeSignature(verifier, delivered), 'carol verifies bob');

    const question = bob.signEnvelope(
      makeEnvelope({
        sender: bob.address,
        target: carol.address,
        payloadJson: '{"text":"ping"}',
      }),
    );
    const answered = await call(t.url, 'POST', '/v2/agents/proxy/submit', {
      body: question,
      headers: { 'x-uagents-connection': 'sync' },
    });
    assert.equal(answered.status, 200, answered.text);
    const reply = answered.body as EnvelopeFields;
    assert.equal(reply.sender, carol.address);
    assert.equal(reply.session, question.session);
    assert.ok(verifyEnvelopeSignature(verifier, reply), 'bob verifies carol’s reply');
    assert.deepEqual(payloadOf(reply), { text: 'pong' });
  });
});
