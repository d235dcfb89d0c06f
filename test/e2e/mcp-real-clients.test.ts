import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/index.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { TOOL_NAMES } from '../kit/mcp.js';
import { freePort } from '../kit/ports.js';
import {
  readyMailboxAgent,
  realClient,
  runScript,
  type RunningScript,
  type ScriptLine,
} from '../kit/real-client.js';
import { startTestServer, type TestServer } from '../kit/server.js';

/**
 * The MCP endpoint (docs/mcp.md) with the real clients at both ends: the official MCP Python
 * SDK's client over the streamable HTTP transport, with a user's API key as its Bearer token;
 * and an unmodified uAgents 0.25 chat agent, a mailbox agent connected with its owner's key,
 * that the client finds and chats with through the tools. It runs with the interpreter
 * AGENTRY_TEST_PYTHON names (`.ci/run` makes one with the real clients: make-venv.sh DIR
 * 0.25.5 mcp) and skips, saying so, where that interpreter cannot import uagents 0.25 or the
 * MCP SDK 2.
 */
const real = realClient('AGENTRY_TEST_PYTHON', { series: '0.25', fallback: 'python3' });

/** Why the tests skip where the interpreter has uagents but not the MCP SDK (2.x). */
function mcpSkip(python: string | undefined): string | false {
  if (python === undefined) return false;
  const probe = spawnSync(
    python,
    [
      '-c',
      'import importlib.metadata as m, mcp, httpx2; from mcp.client.streamable_http import streamable_http_client; print(m.version("mcp"))',
    ],
    { encoding: 'utf8', env: { ...process.env, PYTHONPATH: '' } },
  );
  const how = `make its environment with the MCP SDK (the real client's make-venv.sh DIR 0.25.5 mcp; .ci/run does)`;
  if (probe.status !== 0) {
    const last = probe.stderr.trim().split('\n').pop() ?? '';
    return `${python} cannot import the MCP Python SDK 2 (${last}): ${how}`;
  }
  const version = probe.stdout.trim();
  if (!version.startsWith('2.')) return `${python} has mcp ${version}, not 2.x: ${how}`;
  return false;
}

const skip = real.skip || mcpSkip(real.python);
const python = real.python;

/** The agent: it acknowledges each chat message and answers its text, as its users write one. */
const AGENT_SCRIPT = `
import json, sys
from uagents import Agent, Context, Protocol
from uagents_core.contrib.protocols.chat import (
    ChatAcknowledgement,
    ChatMessage,
    EndSessionContent,
    TextContent,
    chat_protocol_spec,
)

agentverse, port, seed, name = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

agent = Agent(name=name, seed=seed, port=port, mailbox=True, agentverse=agentverse)
chat = Protocol(spec=chat_protocol_spec)


def heard(**fields):
    print(json.dumps(fields), flush=True)


@chat.on_message(ChatMessage)
async def on_message(ctx: Context, sender: str, msg: ChatMessage):
    heard(message=str(msg.msg_id), sender=sender, text=msg.text())
    await ctx.send(sender, ChatAcknowledgement(acknowledged_msg_id=msg.msg_id))
    if any(isinstance(part, EndSessionContent) for part in msg.content):
        return
    if msg.text():
        await ctx.send(sender, ChatMessage(content=[TextContent(text=f"You said: {msg.text()}")]))


@chat.on_message(ChatAcknowledgement)
async def on_acknowledgement(ctx: Context, sender: str, msg: ChatAcknowledgement):
    heard(acknowledged=str(msg.acknowledged_msg_id), sender=sender)


agent.include(chat, publish_manifest=True)
heard(address=agent.address)
agent.run()
`;

/**
 * The MCP client, as a user of the Python SDK writes one: an httpx2 client carrying the API key,
 * the streamable HTTP transport, a session. With the owner's key it lists the tools, searches,
 * and chats with the agent; with a read-only key it tries to start a hosted agent. It prints
 * each step as a JSON line.
 */
const CLIENT_SCRIPT = `
import asyncio, json, sys
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

base, key, read_only_key, agent, hosted, query = sys.argv[1:7]


def say(**fields):
    print(json.dumps(fields), flush=True)


def result(answer):
    return dict(
        is_error=answer.is_error,
        text="".join(part.text for part in answer.content if part.type == "text"),
        structured=answer.structured_content,
    )


async def connected(key, steps):
    exchanges = []

    async def answered(response):
        exchanges.append(f"{response.request.method} {response.status_code}")

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"},
        timeout=httpx2.Timeout(30, read=60),
        event_hooks={"response": [answered]},
    )
    async with http:
        async with streamable_http_client(f"{base}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                hello = await session.initialize()
                say(step="initialize", server=hello.server_info.name,
                    protocol=hello.protocol_version)
                await steps(session)
    say(step="http", exchanges=exchanges)


async def owner(session):
    listed = await session.list_tools()
    for tool in listed.tools:
        say(step="tool", name=tool.name, input_schema=tool.input_schema)
    found = await session.call_tool("search_agents", {"query": query})
    say(step="search", **result(found))
    chatted = await session.call_tool(
        "chat_with_agent", {"agent": agent, "text": "hello", "timeout_seconds": 20}
    )
    answer = result(chatted)
    say(step="chat", session_id=(answer["structured"] or {}).get("session_id"), **answer)


async def read_only(session):
    started = await session.call_tool("start_hosted_agent", {"address": hosted, "wait_seconds": 0})
    say(step="read-only start", **result(started))


async def main():
    await connected(key, owner)
    await connected(read_only_key, read_only)
    say(step="done")


asyncio.run(main())
`;

interface ToolResult {
  is_error: boolean;
  text: string;
  structured: Record<string, unknown> | null;
}

describe(
  'the MCP Python SDK’s client, and a real uAgents chat agent, through the MCP endpoint',
  { skip },
  () => {
    describeOnEachDialect('MCP through the real clients', (dialect) => {
      let t: TestServer;
      let dir: string;
      let agent: RunningScript | undefined;
      let address: string;
      let hosted: string;
      const name = `storyteller${randomBytes(3).toString('hex')}`;
      let client: { lines: ScriptLine[]; output: () => string; code: number | null };

      before(async () => {
        dir = mkdtempSync(join(tmpdir(), 'agentry-mcp-clients-'));
        t = await startTestServer({
          dialect,
          config: {
            // As deployed: the agent's polls are held, and a message reaches it at once.
            mailboxHoldSeconds: 20,
            // Replicas share no key file: on PostgreSQL the operator names the sealing key.
            hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
          },
        });
        writeFileSync(join(dir, 'agent.py'), AGENT_SCRIPT);
        writeFileSync(join(dir, 'mcp_client.py'), CLIENT_SCRIPT);
        const port = await freePort();
        const agentUrl = `http://127.0.0.1:${port}`;
        agent = runScript(python!, 'agent.py', [t.url, String(port), `${name} seed`, name], dir);
        // Its owner connects it with their API key, as the inspector does; it then polls.
        address = await readyMailboxAgent(agent, agentUrl, t);

        // A hosted agent of the owner's, never started, and a read-only key of theirs.
        const created = await call(t.url, 'POST', '/v1/hosting/agents', {
          key: t.userKey,
          body: { name: 'idle hosted' },
        });
        assert.equal(created.status, 200, created.text);
        hosted = created.body.address as string;
        const made = await call(t.url, 'POST', '/v2/api-keys', {
          key: t.userKey,
          body: { read_only: true },
        });
        assert.equal(made.status, 200, made.text);

        const script = runScript(
          python!,
          'mcp_client.py',
          [t.url, t.userKey, made.body.key as string, address, hosted, name],
          dir,
        );
        const stuck = setTimeout(() => script.child.kill('SIGTERM'), 60_000);
        const code = await script.exited;
        clearTimeout(stuck);
        client = { lines: script.lines, output: script.output, code };
      });
      after(async () => {
        agent?.child.kill('SIGTERM');
        await agent?.exited;
        await t?.close();
        rmSync(dir, { recursive: true, force: true });
      });

      const steps = (step: string) => client.lines.filter((line) => line.step === step);
      const only = (step: string): ScriptLine & ToolResult => {
        const [line, ...more] = steps(step);
        assert.ok(line, `no ${step} step:\n${client.output()}`);
        assert.equal(more.length, 0, step);
        return line as ScriptLine & ToolResult;
      };
      const failure = () => `${client.output()}\n--- agent ---\n${agent!.output()}`;

      it('the client’s script runs to its end, on sessions the server opened', (context) => {
        assert.equal(client.code, 0, failure());
        assert.deepEqual(
          steps('initialize').map((line) => line.server),
          ['agentry', 'agentry'],
        );
        assert.equal(steps('done').length, 1);
        // Each session's messages were answered, and its end (the client's DELETE) too; the
        // stream the client asks for (GET) is not there, as the transport allows.
        const sessions = steps('http').map((line) => line.exchanges as string[]);
        context.diagnostic(
          `HTTP exchanges: ${sessions.map((exchanges) => exchanges.join(', ')).join('; ')}`,
        );
        assert.equal(sessions.length, 2);
        for (const exchanges of sessions) {
          const sent = exchanges.filter((exchange) => !exchange.startsWith('GET '));
          assert.deepEqual(
            sent.filter((exchange) => !['POST 200', 'POST 202'].includes(exchange)),
            ['DELETE 200'],
            exchanges.join(', '),
          );
          assert.equal(sent.at(-1), 'DELETE 200', exchanges.join(', '));
          for (const exchange of exchanges.filter((exchange) => exchange.startsWith('GET '))) {
            assert.equal(exchange, 'GET 405');
          }
        }
      });

      it('lists the tools, each with an object input schema', () => {
        const tools = steps('tool');
        assert.deepEqual(
          tools.map((tool) => tool.name),
          TOOL_NAMES,
        );
        for (const tool of tools) {
          const schema = tool.input_schema as { type: string; properties?: object };
          assert.equal(schema.type, 'object', String(tool.name));
          assert.equal(typeof schema.properties, 'object', String(tool.name));
        }
        const search = tools.find((tool) => tool.name === 'search_agents')!;
        assert.ok('query' in (search.input_schema as { properties: object }).properties);
      });

      it('finds the agent by its name, with structured content', () => {
        const found = only('search');
        assert.equal(found.is_error, false, found.text);
        assert.ok(found.structured, 'structured content');
        const agents = (found.structured as { agents: { address: string; name: string }[] }).agents;
        assert.deepEqual(
          agents.map((a) => [a.address, a.name]),
          [[address, name]],
          found.text,
        );
        assert.deepEqual(JSON.parse(found.text), found.structured);
      });

      it('chats with the real agent: its answer, and the session to continue', () => {
        const chat = only('chat');
        assert.equal(chat.is_error, false, `${chat.text}\n${failure()}`);
        assert.equal(chat.text, 'You said: hello');
        assert.ok(chat.structured, 'structured content');
        const answer = chat.structured as {
          session_id: string;
          agent: string;
          reply: string;
          acknowledged: boolean;
        };
        assert.match(String(chat.session_id), /^[0-9a-f-]{36}$/);
        assert.equal(answer.session_id, chat.session_id);
        assert.deepEqual(
          [answer.agent, answer.reply, answer.acknowledged],
          [address, 'You said: hello', true],
        );
        // The agent heard it.
        assert.ok(
          agent!.lines.some((line) => line.text === 'hello'),
          agent!.output(),
        );
      });

      it('answers a read-only key’s start of a hosted agent with a tool error', async () => {
        const refused = only('read-only start');
        assert.equal(refused.is_error, true, JSON.stringify(refused));
        assert.match(refused.text, /read-only/);
        // The agent is as it was.
        const listing = await call(t.url, 'GET', `/v1/hosting/agents/${hosted}`, {
          key: t.userKey,
        });
        assert.equal(listing.status, 200, listing.text);
        assert.equal(listing.body.running, false, listing.text);
      });
    });
  },
);
