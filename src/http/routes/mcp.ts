import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest, JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { UserPrincipal } from '../../auth/principal.js';
import type { AppContext } from '../../context.js';
import { NotFoundError } from '../../errors.js';
import { CODE_MAX_LENGTH } from '../../wire/hosting.js';
import { errorResponses, Success } from '../../wire/common.js';
import { McpErrorAnswer, McpSession, McpSessionParams } from '../../wire/mcp.js';
import { mcpSessionView } from '../../views/mcp-sessions.js';
import { version } from '../../version.js';
import { mcpServer } from '../mcp/handlers.js';
import { acceptJsonRpcBodies, NOT_JSON, NOT_JSON_TYPE } from '../json-rpc-bodies.js';

/** The header that carries an MCP session's id, both ways. */
const SESSION_HEADER = 'mcp-session-id';

/** A JSON-RPC error answer, as the transport of the specification gives them (no request id). */
function rpcError(reply: FastifyReply, status: number, code: number, message: string) {
  return reply
    .code(status)
    .type('application/json')
    .send({ jsonrpc: '2.0', error: { code, message }, id: null });
}

const JsonRpcBody = Type.Unknown({
  description:
    'one JSON-RPC message of the Model Context Protocol (a request, notification or response), or a batch of them',
});

/**
 * The MCP endpoint (docs/mcp.md): the Model Context Protocol's streamable HTTP transport, with
 * a user's API key as its Bearer token. Sessions are Agentry's own rows (any replica answers
 * any session); each request gets a server over the services for its caller, and the key's
 * scope is checked for each tool call as the HTTP API checks each route.
 */
export const mcpRoutes: FastifyPluginAsync<{ ctx: AppContext }> = async (app, { ctx }) => {
  const { mcpSessions } = ctx.services;

  // JSON that is not JSON-RPC, or not JSON at all, is the protocol's to answer (a JSON-RPC
  // parse error), not the HTTP API's `{detail}`.
  acceptJsonRpcBodies(app, ['application/json']);

  const description =
    'The Model Context Protocol (streamable HTTP transport): POST carries JSON-RPC messages (`initialize` opens a session, whose id the `Mcp-Session-Id` header then carries); DELETE ends the session; GET answers 405 (the server sends nothing unasked). Authenticated by a user API key as a Bearer token; docs/mcp.md lists the tools.';
  const config = { auth: 'user', about: 'each-call' } as const;

  app.post(
    '/mcp',
    {
      config,
      bodyLimit: Math.max(ctx.config.bodyLimitBytes, 2 * CODE_MAX_LENGTH),
      schema: {
        tags: ['mcp'],
        summary: 'MCP Messages',
        description,
        body: JsonRpcBody,
        response: {
          200: Type.Unknown({ description: 'JSON-RPC answers, as JSON or as Server-Sent Events' }),
          202: Type.Null({ description: 'notifications and responses accepted' }),
          ...errorResponses(401, 403, 406, 413, 429),
          400: McpErrorAnswer,
          404: McpErrorAnswer,
          415: McpErrorAnswer,
        },
      },
    },
    async (request, reply) => {
      const body: unknown = request.body;
      if (body === NOT_JSON_TYPE) {
        return rpcError(reply, 415, -32000, 'Unsupported Media Type: send JSON (application/json)');
      }
      if (body === NOT_JSON) {
        return rpcError(reply, 400, -32700, 'Parse error: the body is not JSON');
      }
      const principal = request.principal as UserPrincipal;
      const sessionId = request.headers[SESSION_HEADER];
      if (typeof sessionId === 'string' && !namesMethod(body, 'initialize')) {
        // A session's messages: the transport checks them as JSON-RPC itself.
        const refusal = await refusalOf(mcpSessions.use(principal, sessionId));
        if (refusal) return rpcError(reply, 404, -32001, refusal);
      } else if (isInitializeRequest(body)) {
        const id = await mcpSessions.open(principal, {
          name: body.params.clientInfo.name,
          version: body.params.clientInfo.version,
          protocolVersion: body.params.protocolVersion,
        });
        void reply.header(SESSION_HEADER, id);
      } else if (!isJsonRpc(body)) {
        return rpcError(
          reply,
          400,
          -32700,
          'Parse error: the body is not a JSON-RPC message (jsonrpc "2.0" with a method, or a result or error with an id), nor a batch of them',
        );
      } else {
        return rpcError(
          reply,
          400,
          -32000,
          'Bad Request: the Mcp-Session-Id header is required (initialize opens a session)',
        );
      }
      await answer(request, reply, principal, body);
    },
  );

  app.delete(
    '/mcp',
    {
      config,
      schema: {
        tags: ['mcp'],
        summary: 'End MCP Session',
        description,
        response: {
          200: Type.Null({ description: 'the session ended' }),
          ...errorResponses(401, 403, 429),
          400: McpErrorAnswer,
          404: McpErrorAnswer,
        },
      },
    },
    async (request, reply) => {
      const sessionId = request.headers[SESSION_HEADER];
      if (typeof sessionId !== 'string') {
        return rpcError(reply, 400, -32000, 'Bad Request: the Mcp-Session-Id header is required');
      }
      const refusal = await refusalOf(
        mcpSessions.end(request.principal as UserPrincipal, sessionId),
      );
      if (refusal) return rpcError(reply, 404, -32001, refusal);
      return reply.code(200).send();
    },
  );

  app.get(
    '/mcp',
    {
      config,
      schema: {
        tags: ['mcp'],
        summary: 'MCP Server Stream',
        description,
        response: { ...errorResponses(401, 403, 405, 429) },
      },
    },
    async (_request, reply) =>
      reply
        .code(405)
        .header('allow', 'POST, DELETE')
        .send({ detail: 'This MCP server sends nothing unasked: there is no stream to open' }),
  );

  // The owner's view of the assistants connected: every session of the owner's keys.
  app.get(
    '/v2/mcp/sessions',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['mcp'],
        summary: 'List MCP Sessions',
        description:
          'The MCP sessions open with the caller’s keys (or the team’s, with x-team): which assistants are connected, with which key, and when each was last used; the most recently used first.',
        response: { 200: Type.Array(McpSession), ...errorResponses(401, 403) },
      },
    },
    async (request) =>
      (await mcpSessions.list(request.principal as UserPrincipal)).map(mcpSessionView),
  );

  app.delete<{ Params: { id: string } }>(
    '/v2/mcp/sessions/:id',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['mcp'],
        summary: 'End MCP Session',
        description:
          'Ends one of the caller’s MCP sessions, whichever of the caller’s keys opened it: its client’s next request answers 404 and it initializes again (revoke the key to keep it out).',
        params: McpSessionParams,
        response: { 200: Success, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) => {
      await mcpSessions.endOwned(request.principal as UserPrincipal, request.params.id);
      return { success: true };
    },
  );

  /**
   * Does something with a session of the caller's; answers why not, in words, when the id is
   * not (or no longer) one of theirs (the protocol's 404), else undefined.
   */
  async function refusalOf(work: Promise<void>): Promise<string | undefined> {
    try {
      await work;
      return undefined;
    } catch (err) {
      if (err instanceof NotFoundError) return err.message;
      throw err;
    }
  }

  /**
   * Hands the messages to a server of the caller's, through the SDK's transport in its
   * stateless form (the session was checked above). A request that asks for progress is
   * answered as a stream of events, so that its notifications reach the client before the
   * answer; any other as one JSON document.
   */
  async function answer(
    request: FastifyRequest,
    reply: FastifyReply,
    principal: UserPrincipal,
    body: unknown,
  ): Promise<void> {
    const server = mcpServer({
      principal,
      services: ctx.services,
      logger: ctx.logger,
      version,
    });
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: !asksForProgress(body),
    });
    await server.connect(transport);
    // The transport writes the answer itself: the headers set so far (request id, CORS, the
    // session's id) go with it.
    void reply.hijack();
    for (const [name, value] of Object.entries(reply.getHeaders())) {
      if (value !== undefined) reply.raw.setHeader(name, value as string | string[]);
    }
    // A client gone before its answer cancels what the call waits for (a chat's reply, a
    // start); an answer written leaves nothing pending, and the server is simply let go.
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) void server.close();
    });
    await transport.handleRequest(request.raw, reply.raw, body);
  }
};

/** Whether the body is one message calling `method` (a cheap look, before any parse). */
function namesMethod(body: unknown, method: string): boolean {
  return (body as { method?: unknown } | null)?.method === method;
}

/** Whether the body is a JSON-RPC message, or a batch of them. */
function isJsonRpc(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return (
    messages.length > 0 &&
    messages.every((message) => JSONRPCMessageSchema.safeParse(message).success)
  );
}

/** Whether a message (or one of a batch) asks to hear of its progress. */
function asksForProgress(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some((message) => {
    const meta = (message as { params?: { _meta?: { progressToken?: unknown } } } | null)?.params
      ?._meta;
    return meta?.progressToken !== undefined;
  });
}
