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
 * An unmodified uAgents 0.25.5 mailbox agent connected with a key limited to it: what a user
 * does with a short-lived key made to connect one agent (docs/keys.md). It runs with the
 * interpreter AGENTRY_TEST_PYTHON names (`.ci/run` makes one with the real client) and skips,
 * saying so, where that interpreter cannot import uagents 0.25.
 */
const { python, skip } = realClient('AGENTRY_TEST_PYTHON', { series: '0.25', fallback: 'python3' });

/** The agent: it answers each Ping with a Pong and prints what it hears as JSON lines. */
const AGENT_SCRIPT = `
import json, sys
from uagents import Agent, Context, Model

agentverse, port, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3]

class Ping(Model):
    text: str

class Pong(Model):
    text: str

agent = Agent(name="scoped", seed=seed, port=port, mailbox=True, agentverse=agentverse)

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

describe('an unmodified uAgents 0.25 agent connected with a key limited to it', { skip }, () => {
  let t: TestServer;
  let dir: string;
  let child: ChildProcess | undefined;
  const lines: Record<string, unknown>[] = [];
  let agentUrl: string;
  let first: Record<string, unknown>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'agentry-uagents-scoped-'));
    t = await startTestServer();
    const script = join(dir, 'scoped_agent.py');
    writeFileSync(script, AGENT_SCRIPT);
    const port = await freePort();
    agentUrl = `http://127.0.0.1:${port}`;
    child = spawn(python!, [script, t.url, String(port), `scoped ${Math.random()}`], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
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
    first = await waitFor(() => lines[0], 'the agent to start');
    await agentServerUp(agentUrl);
  });
  after(async () => {
    child?.kill('SIGTERM');
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The agent's own `/connect`, as the inspector or `agentry connect` calls it. */
  const connect = async (key: string) => {
    const res = await fetch(`${agentUrl}/connect`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ user_token: key, agent_type: 'mailbox' }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    return (await res.json()) as { success: boolean; detail?: string | null };
  };

  const keyLimitedTo = async (address: string) => {
    const res = await call(t.url, 'POST', '/v2/api-keys', {
      key: t.userKey,
      body: { label: 'connect one agent', addresses: [address], expires_in_seconds: 600 },
    });
    assert.equal(res.status, 200, res.text);
    return res.body.key as string;
  };

  it('is refused with a key limited to another agent, and connects with one limited to it', async () => {
    const address = first.address as string;
    const elsewhere = await connect(await keyLimitedTo(TestIdentity.random().address));
    assert.equal(elsewhere.success, false);
    assert.match(elsewhere.detail ?? '', /limited to one agent/);

    const key = await keyLimitedTo(address);
    const connected = await connect(key);
    assert.deepEqual(connected.success, true, connected.detail ?? '');
    // The key reads its agent, and nothing else of its user's.
    const listing = await call(t.url, 'GET', `/v2/agents/${address}`, { key });
    assert.equal(listing.status, 200, listing.text);
    assert.equal((await call(t.url, 'GET', '/v2/agents', { key })).status, 403);

    // A current agent pings it through its mailbox; its answer comes back.
    const current = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, current);
    await registerInAlmanac(t.url, current, {
      timestamp: Math.floor(Date.now() / 1000),
      endpoints: [{ url: `${t.url}/v2/agents/mailbox/submit`, weight: 1 }],
    });
    const ping = current.signEnvelope(
      makeEnvelope({
        sender: current.address,
        target: address,
        payloadJson: JSON.stringify({ text: 'scoped' }),
        schemaDigest: first.ping as string,
        nonce: 1,
      }),
    );
    const sent = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: ping });
    assert.equal(sent.status, 200, sent.text);
    await waitFor(() => lines.find((line) => line.received === 'scoped'), 'the ping');
    const pong = await waitFor(async () => {
      const res = await call(t.url, 'GET', `/v2/agents/${current.address}/mailbox`, {
        authorization: current.authorization(),
      });
      const items = res.body as { envelope: { sender: string; schema_digest: string } }[];
      return items.find((item) => item.envelope.sender === address);
    }, 'the pong');
    assert.equal(pong.envelope.schema_digest, first.pong);
  });
});
