import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { parseApiKey } from '../../src/auth/api-keys.js';
import { loadConfig } from '../../src/config/index.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { startChatAgent } from '../kit/chat-agent.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { callTool, mcpClient, textOf, TOOL_NAMES } from '../kit/mcp.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import type { TestIdentity } from '../kit/uagent.js';

/**
 * The MCP endpoint (docs/mcp.md) as an MCP client meets it: the official TypeScript SDK's
 * client over the streamable HTTP transport, with a user's API key as its Bearer token, against
 * a real server; the protocol's bad input by hand.
 */

/** A raw JSON-RPC POST to /mcp, as a client that speaks the transport by hand. */
function post(
  t: Pick<TestServer, 'url' | 'userKey'>,
  body: unknown,
  headers: Record<string, string> = {},
) {
  return fetch(`${t.url}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${t.userKey}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'by-hand', version: '0' },
  },
};

describeOnEachDialect('MCP endpoint', (dialect) => {
  let t: TestServer;
  let agent: TestIdentity;
  let echo: Awaited<ReturnType<typeof startChatAgent>>;
  let session: Awaited<ReturnType<typeof mcpClient>>;

  before(async () => {
    t = await startTestServer({
      dialect,
      config: {
        allowPrivateTargets: true,
        hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
      },
    });
    agent = await newRegisteredAgent(hostOf(t), t.userKey, {
      listing: {
        name: 'weather oracle',
        profile: { readme: '# Weather\nForecasts for any city.' },
      },
    });
    echo = await startChatAgent(hostOf(t), t.userKey, { kind: 'echo', prefix: 'echo: ' });
    session = await mcpClient(t.url, t.userKey);
  });
  after(async () => {
    await session?.client.close();
    await echo?.close();
    await t?.close();
  });

  it('names its tools with their schemas, and says who it is', async () => {
    const { tools } = await session.client.listTools();
    assert.deepEqual(
      tools.map((tool) => tool.name),
      TOOL_NAMES,
    );
    for (const tool of tools) {
      assert.equal(tool.inputSchema.type, 'object', tool.name);
      assert.ok(tool.description && tool.description.length > 20, tool.name);
    }
    const search = tools.find((tool) => tool.name === 'search_agents')!;
    assert.ok('query' in (search.inputSchema.properties ?? {}));
    assert.equal(search.annotations?.readOnlyHint, true);
    assert.equal(session.client.getServerVersion()?.name, 'agentry');
    assert.ok(session.transport.sessionId, 'the server gave a session id');
  });

  it('finds an agent by words, and gets it with its record, readme and status', async () => {
    const found = (await session.client.callTool({
      name: 'search_agents',
      arguments: { query: 'weather' },
    })) as CallToolResult;
    assert.equal(found.isError, undefined, textOf(found));
    const agents = (found.structuredContent as { agents: { address: string }[] }).agents;
    assert.ok(
      agents.some((a) => a.address === agent.address),
      textOf(found),
    );
    assert.deepEqual(JSON.parse(textOf(found)), found.structuredContent);

    const got = (await session.client.callTool({
      name: 'get_agent',
      arguments: { address: agent.address },
    })) as CallToolResult;
    assert.equal(got.isError, undefined, textOf(got));
    const body = got.structuredContent as {
      listing: { readme: string };
      record: { address: string; name: string };
    };
    assert.equal(body.record.address, agent.address);
    assert.match(body.listing.readme, /Forecasts/);

    const readme = await session.client.readResource({
      uri: `agentry://agents/${agent.address}/readme`,
    });
    const [contents] = readme.contents;
    assert.ok(contents && 'text' in contents);
    assert.match(contents.text, /Forecasts for any city/);
  });

  it('chats with an agent: the reply’s text, the session to continue, and progress on the way', async () => {
    const steps: string[] = [];
    const first = (await session.client.callTool(
      { name: 'chat_with_agent', arguments: { agent: echo.address, text: 'hello' } },
      undefined,
      { onprogress: (progress) => steps.push(progress.message ?? '') },
    )) as CallToolResult;
    assert.equal(first.isError, undefined, textOf(first));
    assert.equal(textOf(first), 'echo: hello');
    const answer = first.structuredContent as { session_id: string; acknowledged: boolean };
    assert.equal(answer.acknowledged, true);
    assert.ok(
      steps.some((step) => /waiting for its reply/.test(step)),
      steps.join('|'),
    );

    const second = (await session.client.callTool({
      name: 'chat_with_agent',
      arguments: { session_id: answer.session_id, text: 'again' },
    })) as CallToolResult;
    assert.equal(textOf(second), 'echo: again');
    assert.equal(
      (second.structuredContent as { session_id: string }).session_id,
      answer.session_id,
    );
  });

  it('sends a message of any model, signed by the caller’s chat identity, which the trace knows by its id', async () => {
    const schema = `model:${'ab'.repeat(32)}`;
    const sent = await callTool(session.client, 'send_message', {
      to: agent.address,
      schema_digest: schema,
      payload: { city: 'Lisbon' },
    });
    assert.equal(sent.isError, undefined, textOf(sent));
    const { message_id: messageId, to } = sent.structuredContent as {
      message_id: string;
      to: string;
    };
    assert.equal(to, agent.address);
    const mailbox = await call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
      key: t.userKey,
    });
    const stored = (mailbox.body as { envelope: Record<string, string> }[]).find(
      (item) => item.envelope.session === messageId,
    );
    assert.ok(stored, mailbox.text);
    assert.equal(stored.envelope.schema_digest, schema);
    assert.deepEqual(JSON.parse(Buffer.from(stored.envelope.payload!, 'base64').toString()), {
      city: 'Lisbon',
    });
    const identity = await call(t.url, 'GET', '/v2/chat/identity', { key: t.userKey });
    assert.equal(stored.envelope.sender, identity.body.address);
  });

  it('answers a tool error, in words, for arguments that fail the schema and for what cannot be done', async () => {
    const bad = (await session.client.callTool({
      name: 'get_agent',
      arguments: { address: 'agent1nope' },
    })) as CallToolResult;
    assert.equal(bad.isError, true);
    assert.match(textOf(bad), /Invalid arguments for get_agent: address/);
    const extra = (await session.client.callTool({
      name: 'search_agents',
      arguments: { query: 'x', colour: 'blue' },
    })) as CallToolResult;
    assert.equal(extra.isError, true);
    const missing = (await session.client.callTool({
      name: 'get_agent',
      arguments: { address: 'agent1qvyq0m6jvnaz0wrqg2l9ylqlk7h7t6ed4mcwkyqk5qyvfpysv0mqgcslkvf' },
    })) as CallToolResult;
    assert.equal(missing.isError, true);
  });

  it('refuses an unknown tool with the JSON-RPC error the specification names', async () => {
    await assert.rejects(
      session.client.callTool({ name: 'no_such_tool', arguments: {} }),
      (err: unknown) =>
        err instanceof McpError && err.code === -32602 && /Unknown tool/.test(err.message),
    );
  });

  it('answers 404 to a session that is not one, 400 without one, and ends one on DELETE', async () => {
    const headers = { 'mcp-protocol-version': '2025-06-18' };
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} };
    const unknown = await post(t, list, { ...headers, 'mcp-session-id': 'not-a-session' });
    assert.equal(unknown.status, 404);
    assert.equal(((await unknown.json()) as { error: { code: number } }).error.code, -32001);
    const none = await post(t, list, headers);
    assert.equal(none.status, 400);

    const opened = await post(t, INITIALIZE);
    assert.equal(opened.status, 200);
    const id = opened.headers.get('mcp-session-id')!;
    assert.ok(id);
    const listed = await post(t, list, { ...headers, 'mcp-session-id': id });
    assert.equal(listed.status, 200, await listed.clone().text());
    // Another user's key does not reach it.
    const bob = await t.addUser('bob-mcp');
    const stolen = await post(t, list, {
      ...headers,
      'mcp-session-id': id,
      authorization: `Bearer ${bob}`,
    });
    assert.equal(stolen.status, 404);
    const ended = await fetch(`${t.url}/mcp`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${t.userKey}`, 'mcp-session-id': id },
    });
    assert.equal(ended.status, 200);
    const after = await post(t, list, { ...headers, 'mcp-session-id': id });
    assert.equal(after.status, 404);
  });

  it('lists the owner’s sessions with their clients, and the owner ends one from there', async () => {
    const opened = await mcpClient(t.url, t.userKey);
    const id = opened.transport.sessionId!;
    const listed = await call(t.url, 'GET', '/v2/mcp/sessions', { key: t.userKey });
    assert.equal(listed.status, 200, listed.text);
    const mine = (listed.body as { id: string; client_name: string; key_id: string }[]).find(
      (row) => row.id === id,
    );
    assert.equal(mine?.client_name, 'agentry-test');
    assert.equal(mine?.key_id, parseApiKey(t.userKey)!.id);
    // Another user sees none of them, and cannot end one.
    const bob = await t.addUser('bob-lists');
    const theirs = await call(t.url, 'GET', '/v2/mcp/sessions', { key: bob });
    assert.deepEqual(theirs.body, []);
    assert.equal((await call(t.url, 'DELETE', `/v2/mcp/sessions/${id}`, { key: bob })).status, 404);
    // An id that is not one answers as the API answers bad input: 422 for one that is not a
    // UUID, 404 for one that names no session.
    const malformed = await call(t.url, 'DELETE', '/v2/mcp/sessions/not-a-session', {
      key: t.userKey,
    });
    assert.equal(malformed.status, 422, malformed.text);
    const unknown = await call(t.url, 'DELETE', `/v2/mcp/sessions/${randomUUID()}`, {
      key: t.userKey,
    });
    assert.equal(unknown.status, 404, unknown.text);
    const ended = await call(t.url, 'DELETE', `/v2/mcp/sessions/${id}`, { key: t.userKey });
    assert.equal(ended.status, 200, ended.text);
    await assert.rejects(opened.client.listTools(), /404|not found/i);
    await opened.client.close();
  });

  it('answers a session on any replica, and forgets it everywhere once it ends', async () => {
    const replica = await startTestServer({ replicaOf: t });
    try {
      const opened = await mcpClient(t.url, t.userKey);
      const sessionId = opened.transport.sessionId!;
      // The same session through the other replica, as a load balancer without affinity sends it.
      const headers = {
        'mcp-protocol-version': '2025-06-18',
        'mcp-session-id': sessionId,
      };
      const list = { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} };
      const there = await post(replica, list, { ...headers, authorization: `Bearer ${t.userKey}` });
      assert.equal(there.status, 200, await there.clone().text());
      // Ended on the first, it is gone on the second: as soon as the database's notification
      // arrives (PostgreSQL; well within the second the second replica would otherwise trust
      // what it read), within a second where there is none (SQLite).
      await opened.transport.terminateSession();
      const deadline = Date.now() + (dialect === 'postgres' ? 500 : 2000);
      let status: number;
      do {
        const after = await post(replica, list, {
          ...headers,
          authorization: `Bearer ${t.userKey}`,
        });
        status = after.status;
        if (status !== 404) await new Promise((resolve) => setTimeout(resolve, 50));
      } while (status !== 404 && Date.now() < deadline);
      assert.equal(status, 404);
      await opened.client.close();
    } finally {
      await replica.close();
    }
  });

  it('answers a body that is not JSON-RPC with a parse error, and no 5xx', async () => {
    const notJson = await post(t, '{"jsonrpc":');
    assert.equal(notJson.status, 400);
    assert.equal(((await notJson.json()) as { error: { code: number } }).error.code, -32700);
    const notRpc = await post(t, { hello: 'world' });
    assert.equal(notRpc.status, 400);
    assert.equal(((await notRpc.json()) as { error: { code: number } }).error.code, -32700);
    const asText = await post(t, 'hello', { 'content-type': 'text/plain' });
    assert.equal(asText.status, 415);
    const stream = await fetch(`${t.url}/mcp`, {
      headers: { authorization: `Bearer ${t.userKey}`, accept: 'text/event-stream' },
    });
    assert.equal(stream.status, 405);
    const noKey = await call(t.url, 'POST', '/mcp', { body: INITIALIZE });
    assert.equal(noKey.status, 401);
  });

  it('lets a read-only key read and answers its writes with a tool error', async () => {
    const made = await call(t.url, 'POST', '/v2/api-keys', {
      key: t.userKey,
      body: { read_only: true },
    });
    const reader = await mcpClient(t.url, made.body.key as string);
    try {
      const found = (await reader.client.callTool({
        name: 'search_agents',
        arguments: { query: 'weather' },
      })) as CallToolResult;
      assert.equal(found.isError, undefined, textOf(found));
      const write = (await reader.client.callTool({
        name: 'create_hosted_agent',
        arguments: { name: 'nope' },
      })) as CallToolResult;
      assert.equal(write.isError, true);
      assert.match(textOf(write), /read-only/);
    } finally {
      await reader.client.close();
    }
  });
});

describeOnEachDialect('MCP endpoint under rate limits', (dialect) => {
  const MAX = 8;
  let t: TestServer;

  before(async () => {
    t = await startTestServer({ dialect, config: { rateLimit: { max: MAX, windowMs: 60_000 } } });
  });
  after(async () => {
    await t?.close();
  });

  it('counts each request once against the caller’s limit, as any API call, and answers 429 past it', async () => {
    const opened = await post(t, INITIALIZE);
    assert.equal(opened.status, 200);
    const headers = {
      'mcp-protocol-version': '2025-06-18',
      'mcp-session-id': opened.headers.get('mcp-session-id')!,
    };
    const statuses: number[] = [];
    for (let id = 2; id <= MAX + 2; id++) {
      const called = await post(
        t,
        {
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: { name: 'search_agents', arguments: { query: '' } },
        },
        headers,
      );
      statuses.push(called.status);
      if (called.status === 429) {
        assert.ok(Number(called.headers.get('retry-after')) >= 1);
        assert.match(((await called.json()) as { detail: string }).detail, /rate|many/i);
      }
    }
    // The initialize was the first of MAX.
    assert.deepEqual(statuses, [...Array<number>(MAX - 1).fill(200), 429, 429]);
  });
});
