import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/index.js';
import { startSampleA2aAgent, type SampleAgent } from '../kit/a2a-sample-agent.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
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
 * An external A2A agent (docs/a2a.md, "Inward") answering a real uAgents agent: an
 * unmodified uAgents 0.25 mailbox agent, written as its users write one, sends a chat protocol
 * `ChatMessage` with `ctx.send` to the address the A2A agent got when it was registered by its
 * card's URL, and hears the acknowledgement and the A2A agent's answer as a `ChatMessage`. It
 * runs with the interpreter AGENTRY_TEST_PYTHON names and skips, saying so, where that
 * interpreter cannot import uagents 0.25.
 */
const { python, skip } = realClient('AGENTRY_TEST_PYTHON', { series: '0.25', fallback: 'python3' });

/**
 * The asking agent: once `target.txt` names an address (after its owner connected it), it says
 * one chat message to it; it acknowledges what it is answered, and prints what it hears.
 */
const AGENT_SCRIPT = `
import json, os, sys
from uagents import Agent, Context, Protocol
from uagents_core.contrib.protocols.chat import (
    ChatAcknowledgement,
    ChatMessage,
    TextContent,
    chat_protocol_spec,
)

agentverse, port, seed, question = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

agent = Agent(name="asker", seed=seed, port=port, mailbox=True, agentverse=agentverse)
chat = Protocol(spec=chat_protocol_spec)
asked = False


def heard(**fields):
    print(json.dumps(fields), flush=True)


@agent.on_interval(period=0.5)
async def ask(ctx: Context):
    global asked
    if asked or not os.path.exists("target.txt"):
        return
    asked = True
    target = open("target.txt").read().strip()
    msg = ChatMessage(content=[TextContent(text=question)])
    status = await ctx.send(target, msg)
    heard(sent=str(msg.msg_id), to=target, session=str(ctx.session), status=status.status.value,
          detail=status.detail)


@chat.on_message(ChatMessage)
async def on_message(ctx: Context, sender: str, msg: ChatMessage):
    heard(message=str(msg.msg_id), sender=sender, session=str(ctx.session), text=msg.text())
    await ctx.send(sender, ChatAcknowledgement(acknowledged_msg_id=msg.msg_id))


@chat.on_message(ChatAcknowledgement)
async def on_acknowledgement(ctx: Context, sender: str, msg: ChatAcknowledgement):
    heard(acknowledged=str(msg.acknowledged_msg_id), sender=sender, session=str(ctx.session))


agent.include(chat, publish_manifest=True)
heard(address=agent.address)
agent.run()
`;

const QUESTION = 'write about the moon';

describe('a real uAgents agent chatting with an external A2A agent', { skip }, () => {
  describeOnEachDialect('A2A inward', (dialect) => {
    let t: TestServer;
    let dir: string;
    let sample: SampleAgent;
    let agent: RunningScript | undefined;
    let external: { address: string; name: string };

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'agentry-a2a-inward-'));
      t = await startTestServer({
        dialect,
        config: {
          // The A2A agent and the uAgents agent are on loopback, as in a local deployment.
          allowPrivateTargets: true,
          mailboxHoldSeconds: 20,
          // On PostgreSQL the operator names the sealing key.
          hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
        },
      });
      sample = await startSampleA2aAgent({
        name: 'Moon Poet',
        description: 'Writes short poems',
        reply: { kind: 'task', prefix: 'A poem, as asked: ' },
      });
      const registered = await call(t.url, 'POST', '/v2/a2a/external-agents', {
        key: t.userKey,
        body: { card_url: sample.cardUrl },
      });
      assert.equal(registered.status, 201, registered.text);
      external = registered.body as { address: string; name: string };

      writeFileSync(join(dir, 'asker.py'), AGENT_SCRIPT);
      const port = await freePort();
      agent = runScript(
        python!,
        'asker.py',
        [t.url, String(port), `asker ${Math.random()}`, QUESTION],
        dir,
      );
      // Its owner connects it with their API key; it then polls its mailbox.
      await readyMailboxAgent(agent, `http://127.0.0.1:${port}`, t);
      writeFileSync(join(dir, 'target.txt'), external.address);
    });
    after(async () => {
      agent?.child.kill('SIGTERM');
      await agent?.exited;
      await sample?.close();
      await t?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('sends with ctx.send, is acknowledged and hears the A2A agent’s answer', async (tc) => {
      const answer = await waitFor(
        () => agent!.lines.find((line) => line.message !== undefined),
        'the answer',
        30_000,
      ).catch((err: Error) => {
        throw new Error(`${err.message}\n${agent!.output()}`);
      });
      tc.diagnostic(`the uAgents agent heard: ${JSON.stringify(answer)}`);
      const sent = agent!.lines.find((line) => line.sent !== undefined)!;
      assert.equal(sent.to, external.address);
      assert.equal(sent.status, 'delivered', JSON.stringify(sent));
      assert.equal(answer.sender, external.address);
      assert.equal(answer.text, `A poem, as asked: ${QUESTION}`);
      assert.equal(answer.session, sent.session, 'answered in the session it asked in');
      const acknowledged = await waitFor(
        () => agent!.lines.find((line) => line.acknowledged === sent.sent),
        'the acknowledgement',
        10_000,
      );
      assert.equal(acknowledged.sender, external.address);
      // The A2A agent was asked the question, in one context: the uAgents session.
      assert.deepEqual(sample.heard, [{ text: QUESTION, contextId: sent.session }]);
    });

    it('shows the exchange in the external agent’s trace', async () => {
      // The uAgents agent's acknowledgement of the answer arrives last.
      const rows = await waitFor(async () => {
        const trace = await call(t.url, 'GET', `/v2/agents/${external.address}/deliveries`, {
          key: t.userKey,
        });
        const events = (trace.body as { event: string }[]).map((row) => row.event);
        return events.includes('forwarded') ? events : undefined;
      }, 'the trace');
      assert.deepEqual(rows.slice(0, 3), ['submitted', 'delivered', 'forwarded']);
    });
  });
});
