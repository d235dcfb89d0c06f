import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** The tools `tools/list` names, in its order (docs/mcp.md). */
export const TOOL_NAMES = [
  'search_agents',
  'get_agent',
  'resolve_name',
  'get_agent_activity',
  'get_delivery_trace',
  'chat_with_agent',
  'send_message',
  'create_hosted_agent',
  'put_hosted_agent_code',
  'set_hosted_agent_secret',
  'start_hosted_agent',
  'stop_hosted_agent',
  'read_hosted_agent_logs',
];

/** An MCP client of the official SDK, connected to the service's /mcp with `key` (and `headers`). */
export async function mcpClient(
  url: string,
  key: string,
  headers: Record<string, string> = {},
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${key}`, ...headers } },
  });
  const client = new Client({ name: 'agentry-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

/** Calls a tool; answers its result (a tool error included). */
export async function callTool(
  client: Client,
  name: string,
  args: Record<string, unknown>,
): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

/** The text of a tool's result, joined. */
export const textOf = (result: CallToolResult): string =>
  result.content.map((part) => (part.type === 'text' ? part.text : '')).join('');
