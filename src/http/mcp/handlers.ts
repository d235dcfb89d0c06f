import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type CallToolRequest,
  type CallToolResult,
  type ServerNotification,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import * as z from 'zod/v4';
import { scopeRefusal, type UserPrincipal } from '../../auth/principal.js';
import type { AppContext } from '../../context.js';
import { DomainError, NotFoundError, RequestValidationError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import { bodyChecker } from '../../wire/check.js';
import { canonicalAgentAddress } from '../../wire/formats.js';
import { manifestsOf, TOOLS, ToolRefusal, type McpTool } from './tools.js';

/** How the MCP endpoint names itself to clients. */
const INSTRUCTIONS =
  'Agentry hosts uAgents agents: search them, read what they do, chat with them, and run hosted agents. Agents are named by address (agent1…), a name (alice.agent) or a handle.';

/** What `tools/list` answers: the same for every caller (what a key may call is decided at the call). */
const TOOL_LIST: Tool[] = TOOLS.map((tool) => ({
  name: tool.name,
  title: tool.title,
  description: tool.description,
  inputSchema: JSON.parse(JSON.stringify(tool.input)) as Tool['inputSchema'],
  annotations: {
    title: tool.title,
    readOnlyHint: !tool.writes,
    destructiveHint: false,
    openWorldHint: tool.name === 'chat_with_agent' || tool.name === 'send_message',
  },
}));
const BY_NAME = new Map(TOOLS.map((tool) => [tool.name, tool]));
const CHECKS = new Map(TOOLS.map((tool) => [tool.name, bodyChecker(tool.input)]));

/** The resources an agent has, as URI templates. */
const RESOURCE_TEMPLATES = [
  {
    uriTemplate: 'agentry://agents/{address}/readme',
    name: 'agent-readme',
    title: 'Agent readme',
    description: 'An agent’s readme, as its listing holds it (Markdown).',
    mimeType: 'text/markdown',
  },
  {
    uriTemplate: 'agentry://agents/{address}/manifest',
    name: 'agent-manifest',
    title: 'Agent protocol manifests',
    description: 'The manifests of the protocols an agent speaks (JSON).',
    mimeType: 'application/json',
  },
];
const RESOURCE_URI = /^agentry:\/\/agents\/([^/]+)\/(readme|manifest)$/;

/** A `tools/call` request, whatever its parameters (the SDK checks them; see below). */
const ANY_TOOL_CALL = z.object({ method: z.literal('tools/call') }).passthrough();

/** Shared by every request's server: compiling a validator per request would cost more than the call. */
const validator = new AjvJsonSchemaValidator();

export interface McpServerOptions {
  principal: UserPrincipal;
  services: AppContext['services'];
  logger: Logger;
  version: string;
}

/**
 * The MCP server for one HTTP request of a caller (the transport is stateless: sessions are
 * Agentry's own, see McpSessionsService): tools and resources over the services, each call
 * checked against the caller's key as the HTTP API checks its routes.
 */
export function mcpServer(options: McpServerOptions): Server {
  const { principal, services, logger } = options;
  const server = new Server(
    { name: 'agentry', title: 'Agentry', version: options.version },
    {
      capabilities: { tools: { listChanged: false }, resources: {} },
      instructions: INSTRUCTIONS,
      jsonSchemaValidator: validator,
    },
  );

  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOL_LIST }));

  // Registered by its method alone: the SDK then checks the request itself and answers the
  // protocol's invalid-params error for a malformed one (arguments that are not an object),
  // where a parse here would answer an internal error.
  server.setRequestHandler(ANY_TOOL_CALL, async (loose, extra) => {
    const request = loose as unknown as CallToolRequest;
    const tool = BY_NAME.get(request.params.name);
    if (tool === undefined) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `Unknown tool: ${request.params.name} (tools/list names the tools)`,
      );
    }
    const args: Record<string, unknown> = { ...(request.params.arguments ?? {}) };
    const issues = CHECKS.get(tool.name)!(args);
    if (issues.length > 0) {
      const said = issues.map(
        (issue) => `${issue.loc.slice(1).join('.') || 'arguments'}: ${issue.msg}`,
      );
      return refused(`Invalid arguments for ${tool.name}: ${said.join('; ')}`);
    }
    const refusal = principal.scope && scopeRefusal(principal.scope, callOf(tool, args));
    if (refusal) return refused(refusal);
    const token = extra._meta?.progressToken;
    let step = 0;
    const progress = (message: string): void => {
      if (token === undefined) return;
      step += 1;
      const notification: ServerNotification = {
        method: 'notifications/progress',
        params: { progressToken: token, progress: step, message },
      };
      extra.sendNotification(notification).catch(() => {});
    };
    try {
      const answer = await tool.run({ args, principal, services, progress, signal: extra.signal });
      return {
        content: [{ type: 'text', text: answer.text }],
        structuredContent: answer.structured,
      } satisfies CallToolResult;
    } catch (err) {
      if (err instanceof ToolRefusal) return refused(err.message, err.structured);
      if (err instanceof RequestValidationError) {
        return refused(`Invalid arguments for ${tool.name}: ${err.message}`);
      }
      if (err instanceof DomainError) return refused(err.message);
      logger.error({ err, tool: tool.name }, 'MCP tool call failed');
      return refused(`${tool.name} failed on the server; the call may be tried again`);
    }
  });

  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: RESOURCE_TEMPLATES,
  }));
  // The resources are per agent (the templates): none is listed on its own.
  server.setRequestHandler(ListResourcesRequestSchema, () => ({ resources: [] }));

  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const { uri } = request.params;
    const match = RESOURCE_URI.exec(uri);
    const address = match ? canonicalAgentAddress(decoded(match[1]!)) : undefined;
    if (!match || address === undefined) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `Unknown resource: ${uri} (resources/templates/list names them)`,
      );
    }
    const refusal =
      principal.scope && scopeRefusal(principal.scope, { writes: false, about: address });
    if (refusal) throw new McpError(ErrorCode.InvalidRequest, refusal);
    let listing;
    try {
      listing = await services.search.searchAgent(address);
    } catch (err) {
      if (err instanceof NotFoundError) {
        throw new McpError(ErrorCode.InvalidParams, `Agent ${address} is not listed here`);
      }
      throw err;
    }
    if (match[2] === 'readme') {
      return { contents: [{ uri, mimeType: 'text/markdown', text: listing.readme }] };
    }
    const known = await manifestsOf(services.almanac, listing.protocols);
    return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(known) }] };
  });

  return server;
}

/** A URI's part decoded; as it was when it is not valid percent-encoding. */
function decoded(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/** What a tool call is, for the key's scope. */
function callOf(tool: McpTool, args: Record<string, unknown>) {
  return { writes: tool.writes, about: tool.about?.(args as never) };
}

/** A tool error: the reason in words, and what the call came to when there is something. */
function refused(message: string, structured?: Record<string, unknown>): CallToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: message }],
    ...(structured !== undefined &&
      Object.keys(structured).length > 0 && { structuredContent: structured }),
  };
}
