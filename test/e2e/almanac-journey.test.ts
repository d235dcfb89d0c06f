import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  createNodeVerifier,
  verifyEnvelopeSignature,
  type EnvelopeFields,
} from '../../src/crypto/index.js';
import type { Endpoint } from '../../src/wire/common.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import {
  dispense,
  endpointAgentServer,
  mailboxEndpointOf,
  resolveEndpoints,
} from '../kit/client.js';
import {
  postRegistration,
  postStatus,
  resolveAgent,
  signedRegistration,
  signedStatusUpdate,
  unixSeconds,
} from '../kit/almanac.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';

/**
 * Two uAgents on one local network find and message each other through the service alone:
 * A is a mailbox agent, B an agent with its own HTTP endpoint. Each step is played as the
 * uAgents client takes it (uagents 0.25: `config.py`, `registration.py`, `resolver.py`,
 * `communication.py`, `mailbox.py`, `asgi.py`), and every URL an agent sends to comes from
 * the service: the one it was given (`agentverse=`) or one it resolved.
 */

const verifier = createNodeVerifier();
/** `DEFAULT_ENVELOPE_TIMEOUT_SECONDS`: `ctx.send` signs `expires = int(time()) + 30`. */
const ENVELOPE_TIMEOUT_SECONDS = 30;
/** The mailbox client's attestations: `int(MAILBOX_POLL_INTERVAL_SECONDS * 1000)` seconds. */
const ATTESTATION_VALIDITY_SECONDS = 1000;

function payloadOf(envelope: EnvelopeFields): unknown {
  return JSON.parse(Buffer.from(envelope.payload ?? '', 'base64').toString('utf8'));
}

describeOnEachDialect('almanac journey on a local network', (dialect) => {
  // Still unless moved: the journey fits in one signed second, as a short-lived agent's can.
  const clock = new ManualClock();
  const a = TestIdentity.fromSeed('agentry almanac journey mailbox agent A');
  const b = TestIdentity.fromSeed('agentry almanac journey endpoint agent B');
  const atB: EnvelopeFields[] = [];
  const bServer = endpointAgentServer(b, atB);
  let t: TestServer;
  /** What both agents were given as `agentverse=`. */
  let agentverse: string;
  /** B's `endpoint=`: its own server's submit URL. */
  let bEndpoint: string;

  before(async () => {
    bEndpoint = `${await listenOnLoopback(bServer)}/submit`;
    t = await startTestServer({ dialect, clock });
    agentverse = t.config.publicUrl;
  });
  after(async () => {
    await t.close();
    await closeNow(bServer);
  });

  const now = () => unixSeconds(clock.now());

  /**
   * An agent's start-up: the almanac registration and the active status go out from two
   * concurrent tasks, so either may arrive first.
   */
  async function startUp(agent: TestIdentity, endpoints: Endpoint[]): Promise<void> {
    const registration = signedRegistration(agent, { timestamp: now(), endpoints });
    const status = signedStatusUpdate(agent, { active: true, timestamp: now() });
    const [registered, activated] = await Promise.all([
      postRegistration(agentverse, registration),
      postStatus(agentverse, agent.address, status),
    ]);
    assert.equal(registered.status, 200, registered.text);
    assert.equal(activated.status, 200, activated.text);
  }

  it('registers a mailbox agent and an endpoint agent, which resolve as mailbox and uagent', async () => {
    // A's owner connects it (identity proof, then /v2/agents, which opens its mailbox).
    await registerAgent(hostOf(t), t.userKey, a);
    await startUp(a, [{ url: mailboxEndpointOf(agentverse), weight: 1 }]);
    await startUp(b, [{ url: bEndpoint, weight: 1 }]);

    const { record: aRecord, endpoints: toA } = await resolveEndpoints(agentverse, a.address);
    assert.equal(aRecord.address, a.address);
    assert.equal(aRecord.type, 'mailbox');
    assert.equal(aRecord.status, 'active');
    assert.ok(Date.parse(aRecord.expiry) > clock.now(), aRecord.expiry);
    assert.ok(aRecord.endpoints.every(({ weight }) => weight > 0));
    assert.deepEqual(toA, [mailboxEndpointOf(agentverse)]);

    const { record: bRecord, endpoints: toB } = await resolveEndpoints(agentverse, b.address);
    assert.equal(bRecord.type, 'uagent');
    assert.equal(bRecord.status, 'active');
    assert.deepEqual(toB, [bEndpoint]);
  });

  it('carries B’s message to A’s mailbox and A’s reply to B’s own endpoint, each found by resolving', async () => {
    // B: ctx.send(A's address, ...) resolves A and posts to what it got back.
    const { record, endpoints: toA } = await resolveEndpoints(agentverse, a.address);
    assert.equal(record.type, 'mailbox');
    const question = b.signEnvelope(
      makeEnvelope({
        sender: b.address,
        target: a.address,
        payloadJson: '{"text":"hello A, this is B"}',
        expires: now() + ENVELOPE_TIMEOUT_SECONDS,
      }),
    );
    const sent = await dispense(question, toA);
    assert.deepEqual(sent.body, {});
    assert.equal(atB.length, 0, 'nothing reached B yet');

    // A's mailbox client polls and deletes with one attestation while it is valid.
    const authorization = `Agent ${a.attestation({
      validFrom: now(),
      validTo: now() + ATTESTATION_VALIDITY_SECONDS,
    })}`;
    const mailbox = `/v2/agents/${a.address}/mailbox`;
    const polled = await call(agentverse, 'GET', mailbox, { authorization });
    assert.equal(polled.status, 200, polled.text);
    assert.equal(polled.body.length, 1);
    const received = polled.body[0].envelope as EnvelopeFields;
    assert.ok(verifyEnvelopeSignature(verifier, received), 'A verifies B’s signature');
    assert.deepEqual(received, question);
    const deleted = await call(agentverse, 'DELETE', `${mailbox}/${polled.body[0].uuid}`, {
      authorization,
    });
    assert.equal(deleted.status, 200, deleted.text);
    const again = await call(agentverse, 'GET', mailbox, { authorization });
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.body, [], 'a deleted message is not polled again');

    // A's handler answers the sender in the same session: resolve B, post to its endpoint.
    const { record: bRecord, endpoints: toB } = await resolveEndpoints(agentverse, received.sender);
    assert.equal(bRecord.type, 'uagent');
    const reply = a.signEnvelope({
      ...makeEnvelope({
        sender: a.address,
        target: received.sender,
        payloadJson: '{"text":"hello B, A here"}',
        expires: now() + ENVELOPE_TIMEOUT_SECONDS,
      }),
      session: received.session,
    });
    const replied = await dispense(reply, toB);
    assert.deepEqual(replied.body, {});

    assert.equal(atB.length, 1, 'B’s server took the reply');
    const answer = atB[0]!;
    assert.deepEqual(answer, reply);
    assert.equal(answer.sender, a.address);
    assert.equal(answer.session, question.session);
    assert.deepEqual(payloadOf(answer), { text: 'hello B, A here' });
  });

  it('shows A inactive once it signs off, even within the second it started in', async () => {
    // The clock has not moved: A's sign-off carries its start-up status's timestamp.
    const signedOff = await postStatus(
      agentverse,
      a.address,
      signedStatusUpdate(a, { active: false, timestamp: now() }),
    );
    assert.equal(signedOff.status, 200, signedOff.text);

    const { record, endpoints } = await resolveEndpoints(agentverse, a.address);
    assert.equal(record.status, 'inactive');
    assert.equal(record.type, 'mailbox');
    assert.deepEqual(endpoints, [mailboxEndpointOf(agentverse)]);
    const { record: bRecord } = await resolveEndpoints(agentverse, b.address);
    assert.equal(bRecord.status, 'active', 'B did not sign off');
  });

  it('answers 404 for agents that never registered in the almanac, mailbox or not', async () => {
    const stranger = TestIdentity.fromSeed('agentry almanac journey stranger');
    const withMailboxOnly = TestIdentity.fromSeed('agentry almanac journey mailbox only');
    await registerAgent(hostOf(t), t.userKey, withMailboxOnly);
    for (const agent of [stranger, withMailboxOnly]) {
      const res = await resolveAgent(agentverse, agent.address);
      assert.equal(res.status, 404, res.text);
      assert.deepEqual(res.body, { detail: 'agent not found' });
    }
  });
});
