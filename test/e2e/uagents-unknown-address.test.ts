import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/index.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { freePort } from '../kit/ports.js';
import { realClient, runScript, waitFor, type RunningScript } from '../kit/real-client.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';

/**
 * What a real uAgents 0.25 agent meets when it sends to addresses the Almanac holds no
 * registration for (docs/almanac.md): one nobody registered, twice (the first look-up reads
 * whether it is an address this service answers for, the second finds it remembered as a
 * stranger), is answered 404, and the client finds it nowhere; a chat identity of this
 * service resolves to its mailbox endpoint, where a message outside a chat session is
 * refused. No peer or upstream is configured, so nothing is asked afar. Skips, saying why, where
 * AGENTRY_TEST_PYTHON has no uagents 0.25.
 */
const { python, skip } = realClient('AGENTRY_TEST_PYTHON', { series: '0.25' });

const AGENT_SCRIPT = `
import json, sys
from uagents import Agent, Context, Model

agentverse, port, seed, stranger, identity = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]


class Ping(Model):
    n: int


agent = Agent(name="sender", seed=seed, port=port, agentverse=agentverse,
              endpoint=[f"http://127.0.0.1:{port}/submit"])


def say(**fields):
    print(json.dumps(fields), flush=True)


@agent.on_event("startup")
async def send(ctx: Context):
    for n, (to, destination) in enumerate(
        [("stranger", stranger), ("stranger", stranger), ("identity", identity)]
    ):
        try:
            status = await ctx.send(destination, Ping(n=n))
            say(to=to, status=str(status.status.value), detail=status.detail)
        except Exception as err:
            say(to=to, status="raised", detail=str(err))
    say(done=True)

agent.run()
`;

interface Sent {
  to: string;
  status: string;
  detail: string;
}

describeOnEachDialect(
  'real uAgents: sends to addresses the Almanac holds nothing for',
  (dialect) => {
    let t: TestServer;
    let dir: string;
    let agent: RunningScript | undefined;

    before(async () => {
      if (skip) return;
      t = await startTestServer({
        dialect,
        // Chat identities' keys are sealed: on PostgreSQL the operator names the sealing key.
        config: {
          hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
        },
      });
      dir = mkdtempSync(join(tmpdir(), 'agentry-unknown-address-'));
      writeFileSync(join(dir, 'agent.py'), AGENT_SCRIPT);
    });

    after(async () => {
      agent?.child.kill('SIGKILL');
      await agent?.exited;
      if (skip) return;
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it(
      'cannot resolve an address nobody registered, and reaches a chat identity at this service',
      { skip },
      async () => {
        const stranger = TestIdentity.fromSeed(`unknown address stranger ${dialect}`).address;
        const identity = await call(t.url, 'GET', '/v2/chat/identity', {
          headers: { authorization: `Bearer ${t.userKey}` },
        });
        assert.equal(identity.status, 200);
        const identityAddress = (identity.body as { address: string }).address;
        for (const address of [stranger, identityAddress]) {
          const resolved = await call(t.url, 'GET', `/v1/almanac/agents/${address}`);
          assert.equal(resolved.status, address === stranger ? 404 : 200);
        }

        const port = await freePort();
        agent = runScript(
          python!,
          'agent.py',
          [t.url, String(port), `unknown address sender ${dialect}`, stranger, identityAddress],
          dir,
        );
        await waitFor(
          () => agent!.lines.find((line) => line.done === true),
          `the agent's three sends`,
          60_000,
        ).catch((err: unknown) => {
          throw new Error(`${String(err)}\n${agent!.output()}`);
        });
        const sent = agent.lines.filter((line) => typeof line.to === 'string') as unknown as Sent[];
        const output = agent.output();
        assert.deepEqual(
          sent.map(({ to }) => to),
          ['stranger', 'stranger', 'identity'],
          output,
        );
        // Told 404 by the Almanac API, the client turns to the Almanac contract, which no
        // ledger answers here: its send raises, both times.
        for (const { status, detail } of sent.slice(0, 2)) {
          assert.equal(status, 'raised', output);
          assert.match(detail, /^Almanac contract not found/, output);
        }
        // Resolved to this service's mailbox endpoint, which refuses a message that is not a
        // reply in one of the identity's chat sessions.
        assert.deepEqual(
          [sent[2]!.status, sent[2]!.detail],
          ['failed', 'Message delivery failed'],
          output,
        );
      },
    );
  },
);
