import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { hostOf, registerAgent } from '../kit/agents.js';
import { registerInAlmanac } from '../kit/almanac.js';
import { call } from '../kit/http.js';
import { freePort } from '../kit/ports.js';
import { agentServerUp, realClient } from '../kit/real-client.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/**
 * An unmodified uAgents 0.22 agent (the v1 mailroom, docs/mailbox.md), run by Python, connected
 * through its own `/connect`, exchanging messages with a current agent (the test kit's, which
 * speaks v2). It runs with the interpreter AGENTRY_TEST_PYTHON_022 names (`.ci/run` makes one
 * with the real uAgents 0.22.10) and skips, saying so, where that is unset or cannot import
 * uagents 0.22; test/http/mailroom.test.ts replays the same client's requests without Python.
 */
const { python, skip } = realClient('AGENTRY_TEST_PYTHON_022', { series: '0.22' });

/** The 0.22 agent: it answers each Ping with a Pong and prints what it hears as JSON lines. */
const AGENT_SCRIPT = `
import json, sys
from uagents import Agent, Context, Model
from uagents.registration import AlmanacApiRegistrationPolicy

agentverse, kind, port, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

class Ping(Model):
    text: str

class Pong(Model):
    text: str

agent = Agent(
    name="legacy",
    seed=seed,
    port=port,
    mailbox=kind == "mailbox",
    proxy=kind == "proxy",
    agentverse=agentverse,
    registration_policy=AlmanacApiRegistrationPolicy(almanac_api=f"{agentverse}/v1/almanac"),
)

@agent.on_message(Ping)
async def on_ping(ctx: Context, sender: str, msg: Ping):
    print(json.dumps({"received": msg.text, "sender": sender}), flush=True)
    await ctx.send(sender, Pong(text="pong " + msg.text))

print(json.dumps({
    "address": agent.address,
    "ping": Model.build_schema_digest(Ping),
    "pong": Model.build_schema_digest(Pong),
}), flush=True)
agent.run()
`;

interface LegacyAgent {
  child: ChildProcess;
  url: string;
  address: string;
  pingDigest: string;
  pongDigest: string;
  lines: Record<string, unknown>[];
}

async function startLegacyAgent(
  dir: string,
  agentverse: string,
  kind: 'mailbox' | 'proxy',
): Promise<LegacyAgent> {
  const script = join(dir, 'legacy_agent.py');
  writeFileSync(script, AGENT_SCRIPT);
  const port = await freePort();
  const child = spawn(
    python!,
    [script, agentverse, kind, String(port), `legacy ${kind} ${Math.random()}`],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const lines: Record<string, unknown>[] = [];
  let pending = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    pending += chunk.toString();
    let newline: number;
    while ((newline = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, newline).trim();
      pending = pending.slice(newline + 1);
      if (line.startsWith('{')) lines.push(JSON.parse(line) as Record<string, unknown>);
    }
  });
  child.stderr!.resume();
  const url = `http://127.0.0.1:${port}`;
  const first = await waitFor(() => lines[0], 'the agent to start');
  // Its server answers once it runs.
  await agentServerUp(url);
  return {
    child,
    url,
    address: first.address as string,
    pingDigest: first.ping as string,
    pongDigest: first.pong as string,
    lines,
  };
}

async function waitFor<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

describe('an unmodified uAgents 0.22 agent', { skip }, () => {
  let t: TestServer;
  let dir: string;
  const children: ChildProcess[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agentry-uagents-022-'));
    // The proxy agent's endpoint is on loopback.
    t = await startTestServer({ config: { allowPrivateTargets: true } });
  });
  after(async () => {
    for (const child of children) child.kill('SIGTERM');
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const kind of ['mailbox', 'proxy'] as const) {
    it(`connects as a ${kind} agent and exchanges messages with a current agent`, async () => {
      const legacy = await startLegacyAgent(dir, t.url, kind);
      children.push(legacy.child);
      const connected = await fetch(`${legacy.url}/connect`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          user_token: t.userKey,
          agent_type: kind,
          ...(kind === 'proxy' ? { endpoint: `${legacy.url}/submit` } : {}),
        }),
      });
      assert.equal(connected.status, 200, await connected.clone().text());
      assert.equal(((await connected.json()) as { success: boolean }).success, true);

      // The current agent: registered through v2, in the Almanac at its v2 mailbox.
      const current = TestIdentity.random();
      await registerAgent(hostOf(t), t.userKey, current);
      await registerInAlmanac(t.url, current, {
        timestamp: Math.floor(Date.now() / 1000),
        endpoints: [{ url: `${t.url}/v2/agents/mailbox/submit`, weight: 1 }],
      });

      // It finds the 0.22 agent's v1 endpoint in the Almanac and sends there.
      const resolved = await waitFor(async () => {
        const res = await call(t.url, 'GET', `/v1/almanac/agents/${legacy.address}`);
        return res.status === 200 ? (res.body as { endpoints: { url: string }[] }) : undefined;
      }, 'the 0.22 agent’s Almanac registration');
      const endpoint = resolved.endpoints[0]!.url;
      assert.equal(
        endpoint,
        kind === 'mailbox' ? `${t.url}/v1/submit` : `${t.url}/v1/proxy/submit`,
      );
      const ping = current.signEnvelope(
        makeEnvelope({
          sender: current.address,
          target: legacy.address,
          payloadJson: JSON.stringify({ text: kind }),
          schemaDigest: legacy.pingDigest,
          nonce: 1,
        }),
      );
      const sent = await fetch(endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(ping),
      });
      assert.equal(sent.status, 200, await sent.text());

      await waitFor(
        () => legacy.lines.find((line) => line.received === kind),
        'the 0.22 agent to receive the ping',
      );
      // Its answer, resolved through the Almanac, reaches the current agent's v2 mailbox.
      const pong = await waitFor(async () => {
        const res = await call(t.url, 'GET', `/v2/agents/${current.address}/mailbox`, {
          authorization: current.authorization(),
        });
        const items = res.body as {
          envelope: { sender: string; schema_digest: string; payload: string };
        }[];
        return items.find((item) => item.envelope.sender === legacy.address);
      }, 'the pong');
      assert.equal(pong.envelope.schema_digest, legacy.pongDigest);
      assert.deepEqual(JSON.parse(Buffer.from(pong.envelope.payload, 'base64').toString('utf8')), {
        text: `pong ${kind}`,
      });
    });
  }
});
