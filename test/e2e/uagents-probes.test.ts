import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:http';
import { loadConfig } from '../../src/config/index.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';
import { freePort } from '../kit/ports.js';
import {
  readyMailboxAgent,
  realClient,
  runScript,
  waitFor,
  type RunningScript,
} from '../kit/real-client.js';
import { startTestServer, type TestServer } from '../kit/server.js';

/**
 * Health probes (docs/activity.md, "Health") against an unmodified uAgents 0.25 chat agent, a
 * mailbox agent written as its users write one, connected with its owner's API key: its owner
 * asks for probes, the agent answers them, then it is killed (SIGKILL) and stops answering,
 * which its owner hears of by a webhook. It runs with the interpreter AGENTRY_TEST_PYTHON names
 * and skips, saying so, where that interpreter cannot import uagents 0.25.
 */
const { python, skip } = realClient('AGENTRY_TEST_PYTHON', { series: '0.25', fallback: 'python3' });

/** The agent: it acknowledges each chat message, as the chat protocol asks, and says so. */
const AGENT_SCRIPT = `
import json, sys
from uagents import Agent, Context, Protocol
from uagents_core.contrib.protocols.chat import ChatAcknowledgement, ChatMessage, chat_protocol_spec

agentverse, port, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3]
agent = Agent(name="prober", seed=seed, port=port, mailbox=True, agentverse=agentverse)
chat = Protocol(spec=chat_protocol_spec)


@chat.on_message(ChatMessage)
async def on_message(ctx: Context, sender: str, msg: ChatMessage):
    print(json.dumps({"message": str(msg.msg_id), "sender": sender}), flush=True)
    await ctx.send(sender, ChatAcknowledgement(acknowledged_msg_id=msg.msg_id))


@chat.on_message(ChatAcknowledgement)
async def on_acknowledgement(ctx: Context, sender: str, msg: ChatAcknowledgement):
    pass


agent.include(chat, publish_manifest=True)
print(json.dumps({"address": agent.address}), flush=True)
agent.run()
`;

describe('health probes of a real uAgents chat agent, answering, then killed', { skip }, () => {
  describeOnEachDialect('probes', (dialect) => {
    let t: TestServer;
    let dir: string;
    let agent: RunningScript | undefined;
    let address: string;
    const hooks: { kind: string; agent: string; entry: { summary: string } }[] = [];
    const receiver = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        hooks.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        response.writeHead(200).end();
      });
    });
    let receiverUrl: string;

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'agentry-uagents-probes-'));
      receiverUrl = await listenOnLoopback(receiver);
      t = await startTestServer({
        dialect,
        config: {
          allowPrivateTargets: true,
          mailboxHoldSeconds: 20,
          hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
        },
      });
      writeFileSync(join(dir, 'prober.py'), AGENT_SCRIPT);
      const port = await freePort();
      const agentUrl = `http://127.0.0.1:${port}`;
      agent = runScript(
        python!,
        'prober.py',
        [t.url, String(port), `prober ${Math.random()}`],
        dir,
      );
      address = await readyMailboxAgent(agent, agentUrl, t);
      const hook = await call(t.url, 'POST', '/v2/webhooks', {
        key: t.userKey,
        body: { url: `${receiverUrl}/hook`, kinds: ['agent.unhealthy'] },
      });
      assert.equal(hook.status, 201, hook.text);
    });
    after(async () => {
      agent?.child.kill('SIGKILL');
      await agent?.exited;
      await t?.close();
      await closeNow(receiver);
      rmSync(dir, { recursive: true, force: true });
    });

    const health = async () => {
      const res = await call(t.url, 'GET', `/v2/agents/${address}/probes`, { key: t.userKey });
      assert.equal(res.status, 200, res.text);
      return res.body;
    };

    it('is probed once its owner asks, and answers within seconds', async () => {
      assert.equal(agent!.lines.length, 1, 'nothing was sent to it before it was asked for');
      const asked = await call(t.url, 'PUT', `/v2/agents/${address}/probes`, {
        key: t.userKey,
        body: { interval_seconds: 5 },
      });
      assert.equal(asked.status, 200, asked.text);
      const answered = await waitFor(
        async () => ((await health()).healthy === true ? await health() : undefined),
        'the first probe answered',
        30_000,
      );
      assert.ok(answered.last_latency_ms < 5000, `latency ${answered.last_latency_ms} ms`);
      assert.equal(answered.success_rate, 1);
      assert.ok(
        agent!.lines.some((line) => line.message !== undefined),
        agent!.output(),
      );
      const searched = await call(t.url, 'POST', '/v1/search/agents', {
        body: { search_text: `address:${address}` },
      });
      assert.equal(searched.body.agents[0].recent_success_rate, 1);
    });

    it('is unhealthy, with a webhook, once killed', async () => {
      agent!.child.kill('SIGKILL');
      await agent!.exited;
      const killedAt = Date.now();
      const down = await waitFor(
        async () => ((await health()).healthy === false ? await health() : undefined),
        'the agent to be unhealthy',
        40_000,
      );
      assert.equal(down.unanswered, 2);
      assert.ok(down.success_rate < 1);
      const hook = await waitFor(
        () => hooks.find((h) => h.kind === 'agent.unhealthy'),
        'the agent.unhealthy webhook',
        10_000,
      );
      assert.equal(hook.agent, address);
      assert.match(hook.entry.summary, /stopped answering health probes/);
      assert.ok(Date.now() - killedAt < 30_000);
    });
  });
});
