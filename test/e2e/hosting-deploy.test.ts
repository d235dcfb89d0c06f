import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaults } from '../../src/config/index.js';
import {
  createNodeVerifier,
  verifyEnvelopeSignature,
  type EnvelopeFields,
} from '../../src/crypto/index.js';
import type { DialectName } from '../../src/store/index.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import { registerInAlmanac, resolveAgent, unixSeconds } from '../kit/almanac.js';
import { dispense, mailboxEndpointOf, resolveEndpoints } from '../kit/client.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { hostingDir, hostingSkipReason } from '../kit/hosted-agents.js';
import { call } from '../kit/http.js';
import { realClient } from '../kit/real-client.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import {
  echoAgentFile,
  REPLY_DIGEST,
  REQUEST_DIGEST,
  standInInterpreter,
} from '../kit/stand-in.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/**
 * The Hosting API's deploy flow as its users drive it: create an agent, put its code, give it
 * a secret, start it, and then talk to it as another agent does — through the Almanac and the
 * mailboxes — and read what it logged and stored, then stop it. The code is an ordinary
 * uAgents agent (test/fixtures/hosting/echo_agent.py). It runs on the stand-in `uagents`
 * package, with no sandbox and in bubblewrap with egress to this Agentry only, and the same on
 * the real package where the test interpreter has it.
 */

const verifier = createNodeVerifier();
const GREETING = 'hello from a hosted agent';

function payloadOf(envelope: EnvelopeFields): unknown {
  return JSON.parse(Buffer.from(envelope.payload ?? '', 'base64').toString('utf8'));
}

async function eventually<T>(
  what: string,
  attempt: () => Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await attempt();
    if (found !== undefined) return found;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

interface DeployFlowOptions {
  /** The interpreter agents run with; undefined makes one with the stand-in. */
  python?: string;
  /** Egress is 'agentry' (the default): only this Agentry is reached, through a bridge in bwrap. */
  sandbox: 'off' | 'bwrap';
  dialect?: DialectName;
}

function deployFlow({ python, sandbox, dialect }: DeployFlowOptions): void {
  let t: TestServer;
  let scratch: ReturnType<typeof hostingDir> | undefined;
  let interpreterDir: string | undefined;
  let address: string;
  const bob = TestIdentity.fromSeed(`hosting deploy bob ${sandbox}`);

  const hosting = (method: string, path: string, body?: unknown) =>
    call(t.url, method, `/v1/hosting${path}`, { key: t.userKey, body });

  const logEntries = async (): Promise<string[]> => {
    const res = await hosting('GET', `/agents/${address}/logs/latest`);
    assert.equal(res.status, 200, res.text);
    return (res.body as { log_entry: string }[]).map((line) => line.log_entry);
  };

  const stateOf = async (): Promise<Record<string, unknown>> => {
    const res = await hosting('GET', `/agents/${address}`);
    assert.equal(res.status, 200, res.text);
    return res.body;
  };

  before(async () => {
    // Opened to other users: a sandboxed agent runs as a user of its own.
    scratch = hostingDir();
    let interpreter = python;
    if (interpreter === undefined) {
      interpreterDir = mkdtempSync(join(tmpdir(), 'agentry-stand-in-python-'));
      interpreter = standInInterpreter(interpreterDir);
    }
    t = await startTestServer({
      dialect,
      config: {
        hosting: {
          ...defaults.hosting,
          // PostgreSQL keeps no key file beside the database: the key is a setting there.
          key: randomBytes(32).toString('hex'),
          python: interpreter,
          sandbox,
          egress: 'agentry',
          // Deeper than a unix socket's path may be: the bridges' sockets are elsewhere.
          dir: join(scratch.dir, 'data', 'hosted-agents-of-a-deployment-with-a-long-data-path'),
        },
      },
    });
    await registerAgent(hostOf(t), t.userKey, bob);
    await registerInAlmanac(t.url, bob, {
      timestamp: unixSeconds(Date.now()),
      endpoints: [{ url: mailboxEndpointOf(t.url), weight: 1 }],
    });
  });
  after(async () => {
    await t?.close();
    scratch?.remove();
    if (interpreterDir) rmSync(interpreterDir, { recursive: true, force: true });
  });

  it('creates the agent, puts its code and its secret, and starts it', async () => {
    const created = await hosting('POST', '/agents', { name: 'echo' });
    assert.equal(created.status, 200, created.text);
    address = created.body.address;
    assert.match(address, /^agent1[02-9ac-hj-np-z]{59}$/);

    const code = JSON.stringify([
      { language: 'python', name: 'agent.py', value: readFileSync(echoAgentFile, 'utf8') },
    ]);
    const put = await hosting('PUT', `/agents/${address}/code`, { code });
    assert.equal(put.status, 200, put.text);
    const secret = await hosting('POST', '/secrets', {
      address,
      name: 'GREETING',
      secret: GREETING,
    });
    assert.equal(secret.status, 200, secret.text);

    const started = await hosting('POST', `/agents/${address}/start`);
    assert.equal(started.status, 200, started.text);
    await eventually('the agent to run', async () => {
      const agent = await stateOf();
      assert.notEqual(agent.state, 'failed', `the agent failed: ${String(agent.state_reason)}`);
      assert.notEqual(agent.state, 'crashed', `the agent crashed: ${String(agent.state_reason)}`);
      return agent.running === true && agent.state === 'running' ? agent : undefined;
    });
  });

  it('registers in the Almanac as a mailbox agent of this Agentry', async () => {
    const record = await eventually('the Almanac registration', async () => {
      const res = await resolveAgent(t.url, address);
      return res.status === 200 ? res.body : undefined;
    });
    assert.deepEqual(record.endpoints, [{ url: mailboxEndpointOf(t.url), weight: 1 }]);
    const containment =
      sandbox === 'bwrap' ? /sandbox bwrap.*egress this Agentry only/ : /sandbox off/;
    const expected = [
      containment,
      // The agent registered itself (uAgents logs this line, and the stand-in too).
      /Registration on Almanac API successful/,
      new RegExp(`echo agent ${address} is up`),
    ];
    await eventually(`log lines matching ${expected.join(', ')}`, async () => {
      const lines = await logEntries();
      return expected.every((pattern) => lines.some((line) => pattern.test(line)))
        ? lines
        : undefined;
    });
  });

  it('answers a message sent through its mailbox, with its secret, counting in its storage', async () => {
    for (const [n, text] of ['first', 'second'].entries()) {
      const request = bob.signEnvelope(
        makeEnvelope({
          sender: bob.address,
          target: address,
          payloadJson: JSON.stringify({ text }),
          schemaDigest: REQUEST_DIGEST,
          expires: unixSeconds(Date.now()) + 30,
        }),
      );
      await dispense(request, (await resolveEndpoints(t.url, address)).endpoints);

      const authorization = bob.authorization();
      const [item] = await eventually('the reply in bob’s mailbox', async () => {
        const polled = await call(t.url, 'GET', `/v2/agents/${bob.address}/mailbox`, {
          authorization,
        });
        assert.equal(polled.status, 200, polled.text);
        return polled.body.length > 0
          ? (polled.body as { uuid: string; envelope: EnvelopeFields }[])
          : undefined;
      });
      const reply = item!.envelope;
      assert.equal(reply.sender, address);
      assert.equal(reply.session, request.session, 'a reply keeps the session');
      assert.equal(reply.schema_digest, REPLY_DIGEST);
      assert.ok(
        verifyEnvelopeSignature(verifier, reply),
        'the reply is signed with the agent’s key',
      );
      assert.deepEqual(payloadOf(reply), { text: `${GREETING}, ${text}`, count: n + 1 });
      const deleted = await call(
        t.url,
        'DELETE',
        `/v2/agents/${bob.address}/mailbox/${item!.uuid}`,
        { authorization },
      );
      assert.equal(deleted.status, 200, deleted.text);
    }
  });

  it('shows the handler’s log lines and what it stored', async () => {
    await eventually('the handler’s line in the logs', async () => {
      const lines = await logEntries();
      return lines.some((line) => line.includes(`request 2 from ${bob.address}: second`))
        ? lines
        : undefined;
    });
    const storage = await hosting('GET', `/agents/${address}/storage`);
    assert.equal(storage.status, 200, storage.text);
    const items = Object.fromEntries(
      (storage.body.items as { key: string; value: string }[]).map(({ key, value }) => [
        key,
        value,
      ]),
    );
    assert.deepEqual(items, { count: '2', last_text: '"second"' });
  });

  it('stops', async () => {
    const stopped = await hosting('POST', `/agents/${address}/stop`);
    assert.equal(stopped.status, 200, stopped.text);
    await eventually('the agent to stop', async () => {
      const agent = await stateOf();
      return agent.running === false && agent.state === 'stopped' ? agent : undefined;
    });
  });
}

describe(
  'hosted agents: the deploy flow on the stand-in uagents',
  { skip: hostingSkipReason('off') },
  () => {
    describeOnEachDialect('without a sandbox', (dialect) =>
      deployFlow({ sandbox: 'off', dialect }),
    );
    describe(
      'in bubblewrap, reaching only this Agentry',
      { skip: hostingSkipReason('bwrap') },
      () => deployFlow({ sandbox: 'bwrap' }),
    );
  },
);

/**
 * The interpreter AGENTRY_TEST_PYTHON names (or python3): where it has the real uagents, the
 * same flow runs on it, without a sandbox and in bubblewrap (which runs the interpreter as the
 * agent's own user: its environment must be readable by every user).
 */
const real = realClient('AGENTRY_TEST_PYTHON', { fallback: 'python3' });
describe('hosted agents: the deploy flow on the real uagents', { skip: real.skip }, () => {
  describe('without a sandbox', () => deployFlow({ python: real.python!, sandbox: 'off' }));
  describe('in bubblewrap, reaching only this Agentry', { skip: hostingSkipReason('bwrap') }, () =>
    deployFlow({ python: real.python!, sandbox: 'bwrap' }),
  );
});
