import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createNodeVerifier,
  verifyEnvelopeSignature,
  type EnvelopeFields,
} from '../../src/crypto/index.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import { registerInAlmanac, resolveAgent, unixSeconds } from '../kit/almanac.js';
import { dispense, mailboxEndpointOf, resolveEndpoints } from '../kit/client.js';
import { call } from '../kit/http.js';
import { ChildRun } from '../kit/process.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import {
  echoAgentFile,
  hostingFixtures,
  pythonExecutable,
  REPLY_DIGEST,
  REQUEST_DIGEST,
  standInPath,
} from '../kit/stand-in.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/**
 * The stand-in `uagents` package that the hosting tests run where the real one is not
 * installed: its Python unittests (against the vectors the real uagents-core made), then a
 * local agent built on it against a real server, as a uAgents mailbox agent meets Agentry:
 * Almanac registration, mailbox polls with attestations, a signed answer sent through the
 * Almanac and the receiver's mailbox.
 */

const python = pythonExecutable();
const skip = python ? false : 'no python3 on this machine (set AGENTRY_TEST_PYTHON)';
const verifier = createNodeVerifier();

function payloadOf(envelope: EnvelopeFields): unknown {
  return JSON.parse(Buffer.from(envelope.payload ?? '', 'base64').toString('utf8'));
}

/** Polls `identity`'s mailbox until it holds something; answers the items. */
async function nextMail(
  url: string,
  identity: TestIdentity,
  timeoutMs = 30_000,
): Promise<{ uuid: string; envelope: EnvelopeFields }[]> {
  const authorization = identity.authorization();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const polled = await call(url, 'GET', `/v2/agents/${identity.address}/mailbox`, {
      authorization,
    });
    assert.equal(polled.status, 200, polled.text);
    if (polled.body.length > 0) return polled.body;
    assert.ok(Date.now() < deadline, `nothing reached ${identity.address}'s mailbox`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('the stand-in uagents package', { skip }, () => {
  it('passes its unittests: keys, signatures, attestations, envelopes, schema digests', () => {
    const result = spawnSync(python!, ['-m', 'unittest', 'discover', '-s', 'tests', '-t', '.'], {
      cwd: standInPath,
      encoding: 'utf8',
      env: { ...process.env, PYTHONPATH: standInPath, PYTHONDONTWRITEBYTECODE: '1' },
    });
    assert.equal(result.status, 0, `${result.stdout}${result.stderr}`);
    assert.match(result.stderr, /^OK/m);
  });

  describe('as a local mailbox agent of a real server', () => {
    let t: TestServer;
    let agentDir: string;
    let agent: ChildRun;
    const seed = `stand-in echo agent ${Date.now()}`;
    const echo = TestIdentity.fromSeed(seed);
    const bob = TestIdentity.fromSeed('stand-in journey bob');

    before(async () => {
      t = await startTestServer();
      // The user registers the agent (its mailbox comes with it), as the inspector's
      // connect does; bob is a mailbox agent too, found through the Almanac.
      await registerAgent(hostOf(t), t.userKey, echo);
      await registerAgent(hostOf(t), t.userKey, bob);
      await registerInAlmanac(t.url, bob, {
        timestamp: unixSeconds(Date.now()),
        endpoints: [{ url: mailboxEndpointOf(t.url), weight: 1 }],
      });
      agentDir = mkdtempSync(join(tmpdir(), 'agentry-stand-in-'));
      agent = ChildRun.spawn(
        'stand-in agent',
        python!,
        [join(hostingFixtures, 'run_local.py'), echoAgentFile],
        {
          ...process.env,
          PYTHONPATH: standInPath,
          PYTHONDONTWRITEBYTECODE: '1',
          AGENTRY_AGENT_SEED: seed,
          AGENTRY_AGENT_NAME: 'echo',
          AGENTRY_URL: t.url,
          GREETING: 'hello from the stand-in',
        },
        agentDir,
      );
    });
    after(async () => {
      await agent?.stop();
      await t?.close();
      rmSync(agentDir, { recursive: true, force: true });
    });

    it('registers its mailbox endpoint in the Almanac and marks itself active', async () => {
      await agent.waitForOutput(/Registration on Almanac API successful/, 30_000);
      await agent.waitForOutput(/Agent registration status updated to active/, 30_000);
      const record = await resolveAgent(t.url, echo.address);
      assert.equal(record.status, 200, record.text);
      assert.deepEqual(record.body.endpoints, [{ url: mailboxEndpointOf(t.url), weight: 1 }]);
      assert.equal(record.body.status, 'active');
      assert.match(
        agent.stdout(),
        new RegExp(`INFO: +\\[ echo\\]: echo agent ${echo.address} is up`),
      );
    });

    it('answers each message through the sender’s mailbox, keeping count in its storage', async () => {
      for (const [n, text] of ['first', 'second'].entries()) {
        // Bob sends as a uAgent does: resolve in the Almanac, then post to the endpoint.
        const request = bob.signEnvelope(
          makeEnvelope({
            sender: bob.address,
            target: echo.address,
            payloadJson: JSON.stringify({ text }),
            schemaDigest: REQUEST_DIGEST,
            expires: unixSeconds(Date.now()) + 30,
          }),
        );
        await dispense(request, (await resolveEndpoints(t.url, echo.address)).endpoints);

        const [item, ...more] = await nextMail(t.url, bob);
        assert.deepEqual(more, []);
        const reply = item!.envelope;
        assert.equal(reply.sender, echo.address);
        assert.equal(reply.target, bob.address);
        assert.equal(reply.session, request.session, 'a reply keeps the session');
        assert.equal(reply.schema_digest, REPLY_DIGEST);
        assert.ok(verifyEnvelopeSignature(verifier, reply), 'the reply is signed by the agent');
        assert.deepEqual(payloadOf(reply), {
          text: `hello from the stand-in, ${text}`,
          count: n + 1,
        });
        const deleted = await call(
          t.url,
          'DELETE',
          `/v2/agents/${bob.address}/mailbox/${item!.uuid}`,
          {
            authorization: bob.authorization(),
          },
        );
        assert.equal(deleted.status, 200, deleted.text);
      }

      assert.match(agent.stdout(), new RegExp(`request 2 from ${bob.address}: second`));
      const stored = JSON.parse(
        readFileSync(join(agentDir, `${echo.address.slice(0, 16)}_data.json`), 'utf8'),
      );
      assert.deepEqual(stored, { count: 2, last_text: 'second' });
      // The agent deleted what it dispatched: its mailbox is empty.
      const left = await call(t.url, 'GET', `/v2/agents/${echo.address}/mailbox`, {
        authorization: echo.authorization(),
      });
      assert.deepEqual(left.body, []);
    });
  });
});
