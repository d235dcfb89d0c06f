import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EnvelopeFields } from '../../src/crypto/index.js';
import { signedStatusUpdate, unixSeconds } from '../kit/almanac.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';
import { freePort } from '../kit/ports.js';
import { realClient } from '../kit/real-client.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';

/**
 * uAgents 0.25's `ctx.broadcast` to the chat protocol, from a real agent, reaching A2A bridges
 * of the agentverse-sdk (replayed as the sdk calls Agentry: provisioned with an Agent URI,
 * registered with their own attestation, their status set; docs/enrolments.md), which never
 * register in the Almanac themselves: the running bridges get the message, the stopped one
 * does not. It runs with the interpreter AGENTRY_TEST_PYTHON names and skips, saying so, where
 * that interpreter cannot import uagents 0.25.
 */
const { python, skip } = realClient('AGENTRY_TEST_PYTHON', { series: '0.25', fallback: 'python3' });

const CHAT_PROTOCOL = 'proto:30a801ed3a83f9a0ff0a9f1e6fe958cb91da1fc2218b153df7b6cbf87bd33d62';

/** The broadcaster: once started, it broadcasts a chat message and prints where it went. */
const AGENT_SCRIPT = `
import json, sys
from uagents import Agent, Context, Protocol
from uagents_core.contrib.protocols.chat import (
    ChatAcknowledgement,
    ChatMessage,
    TextContent,
    chat_protocol_spec,
)

agentverse, port, seed, digest = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
agent = Agent(name="caster", seed=seed, port=port, mailbox=True, agentverse=agentverse)
chat = Protocol(spec=chat_protocol_spec)


@chat.on_message(ChatMessage)
async def on_message(ctx: Context, sender: str, msg: ChatMessage):
    pass


@chat.on_message(ChatAcknowledgement)
async def on_acknowledgement(ctx: Context, sender: str, msg: ChatAcknowledgement):
    pass


agent.include(chat)
done = False


@agent.on_interval(period=1.0)
async def cast(ctx: Context):
    global done
    if done:
        return
    done = True
    statuses = await ctx.broadcast(digest, ChatMessage(content=[TextContent(text="hello bridges")]))
    print(json.dumps({"sent": sorted(s.destination for s in statuses)}), flush=True)


agent.run()
`;

/** An A2A bridge's own server: keeps each envelope posted to `/av/chat`. */
async function startBridgeServer() {
  const received: EnvelopeFields[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.url === '/av/chat') {
        received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as EnvelopeFields);
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const url = await listenOnLoopback(server);
  return { url, received, close: () => closeNow(server) };
}

/** `generate_agent_auth_token`: an attestation from now, for 120 s, as the sdk makes it. */
function sdkAuthorization(identity: TestIdentity): string {
  const now = Math.floor(Date.now() / 1000);
  return `Agent ${identity.attestation({ validFrom: now, validTo: now + 120 })}`;
}

describe(
  'a real uAgents broadcast to the chat protocol reaches the running A2A bridges',
  { skip },
  () => {
    describeOnEachDialect('broadcast', (dialect) => {
      let t: TestServer;
      let dir: string;
      const bridges: {
        identity: TestIdentity;
        server: Awaited<ReturnType<typeof startBridgeServer>>;
      }[] = [];
      let sent: string[] = [];
      let output = '';

      /** A bridge as the sdk starts it: provisioned, registered itself, status active. */
      async function startBridge(name: string) {
        const issued = await call(t.url, 'POST', '/v2/enrolments', {
          key: t.userKey,
          body: { name },
        });
        assert.equal(issued.status, 200, issued.text);
        const key = /^[a-z]+:\/\/[^:]+:([^@]+)@/.exec(issued.body.agent_uri)![1]!;
        const identity = TestIdentity.fromSeed(key, 0);
        const server = await startBridgeServer();
        const registered = await call(t.url, 'POST', '/v2/agents', {
          authorization: sdkAuthorization(identity),
          body: {
            address: identity.address,
            name,
            handle: issued.body.handle,
            url: null,
            agent_type: 'a2a',
            profile: { description: name, readme: '', avatar_url: null, banner_url: '' },
            endpoints: [{ url: `${server.url}/av/chat`, weight: 1 }],
            protocols: [CHAT_PROTOCOL],
            metadata: null,
          },
        });
        assert.equal(registered.status, 200, registered.text);
        const status = await call(t.url, 'POST', `/v1/almanac/agents/${identity.address}/status`, {
          body: signedStatusUpdate(identity, {
            active: true,
            timestamp: unixSeconds(Date.now()),
            prefix: null,
          }),
        });
        assert.equal(status.status, 200, status.text);
        const bridge = { identity, server };
        bridges.push(bridge);
        return bridge;
      }

      before(async () => {
        dir = mkdtempSync(join(tmpdir(), 'agentry-uagents-broadcast-'));
        t = await startTestServer({ dialect, config: { allowPrivateTargets: true } });
        await startBridge('Weather Bridge');
        await startBridge('News Bridge');
        const stopped = await startBridge('Stopped Bridge');
        const stop = await call(
          t.url,
          'POST',
          `/v1/almanac/agents/${stopped.identity.address}/status`,
          {
            body: signedStatusUpdate(stopped.identity, {
              active: false,
              timestamp: unixSeconds(Date.now()) + 1,
              prefix: null,
            }),
          },
        );
        assert.equal(stop.status, 200, stop.text);

        writeFileSync(join(dir, 'caster.py'), AGENT_SCRIPT);
        const port = await freePort();
        const child = spawn(
          python!,
          ['caster.py', t.url, String(port), `caster ${randomUUID()}`, CHAT_PROTOCOL],
          { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
        );
        child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
        const deadline = Date.now() + 60_000;
        for (;;) {
          const line = output.split('\n').find((l) => l.startsWith('{"sent"'));
          if (line) {
            sent = (JSON.parse(line) as { sent: string[] }).sent;
            break;
          }
          if (Date.now() > deadline) break;
          await sleep(100);
        }
        child.kill('SIGKILL');
      });
      after(async () => {
        for (const bridge of bridges) await bridge.server.close();
        await t?.close();
        rmSync(dir, { recursive: true, force: true });
      });

      it('sends to each running bridge and not to the stopped one', () => {
        const [weather, news, stopped] = bridges;
        assert.deepEqual(
          sent,
          [weather!.identity.address, news!.identity.address].sort(),
          output.slice(-4000),
        );
        for (const bridge of [weather!, news!]) {
          assert.equal(bridge.server.received.length, 1, output.slice(-4000));
          const envelope = bridge.server.received[0]!;
          assert.equal(envelope.target, bridge.identity.address);
          const payload = JSON.parse(Buffer.from(envelope.payload!, 'base64').toString('utf8'));
          assert.deepEqual(payload.content, [{ type: 'text', text: 'hello bridges' }]);
        }
        assert.equal(stopped!.server.received.length, 0);
      });
    });
  },
);
