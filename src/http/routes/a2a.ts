import {
  A2A_LEGACY_PROTOCOL_VERSION,
  isLegacyJsonRpcMethod,
  LEGACY_METHOD_TASKS_RESUBSCRIBE,
} from '@a2a-js/sdk/compat/v0_3';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import {
  A2A_PROTOCOL_VERSION,
  A2A_VERSION_HEADER,
  AgentCard,
  Extensions,
  formatSSEErrorEvent,
  formatSSEEvent,
  HTTP_EXTENSION_HEADER,
  SSE_HEADERS,
} from '@a2a-js/sdk';
import { JsonRpcTransportHandler, ServerCallContext, validateVersion } from '@a2a-js/sdk/server';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { UserPrincipal } from '../../auth/principal.js';
import type { AppContext } from '../../context.js';
import { ForbiddenError } from '../../errors.js';
import {
  A2A_TEXT_MAX_LENGTH,
  A2aRpcError,
  A2aParams,
  A2aSetting,
  A2aSettingRequest,
  AgentCardsIndex,
  AgentCardsQuery,
} from '../../wire/a2a.js';
import { AddressParams, errorResponses } from '../../wire/common.js';
import { acceptJsonRpcBodies, NOT_JSON, NOT_JSON_TYPE } from '../json-rpc-bodies.js';

/** The methods that send or change something (a read-only key may not call them). */
const WRITE_METHODS = new Set([
  'SendMessage',
  'SendStreamingMessage',
  'CancelTask',
  'CreateTaskPushNotificationConfig',
  'DeleteTaskPushNotificationConfig',
  'message/send',
  'message/stream',
  'tasks/cancel',
  'tasks/pushNotificationConfig/set',
  'tasks/pushNotificationConfig/delete',
]);
/** The methods that carry a message to the agent. */
const SEND_METHODS = new Set([
  'SendMessage',
  'SendStreamingMessage',
  'message/send',
  'message/stream',
]);

/**
 * The owner's setting: whether an agent is served over A2A, and to whom (docs/a2a.md).
 */
export function a2aSettingRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { a2a } = ctx.services;

  r.get(
    '/v2/agents/:address/a2a',
    {
      config: { auth: 'user', about: { agent: 'params', field: 'address' } },
      schema: {
        tags: ['a2a'],
        summary: 'Get A2A Setting',
        description:
          'Whether the caller’s agent is served over A2A (off, private or public), and where its card and JSON-RPC endpoint are.',
        params: AddressParams,
        response: { 200: A2aSetting, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) => a2a.setting(request.principal as UserPrincipal, request.params.address),
  );

  r.put(
    '/v2/agents/:address/a2a',
    {
      config: { auth: 'user', about: { agent: 'params', field: 'address' } },
      schema: {
        tags: ['a2a'],
        summary: 'Set A2A Setting',
        description:
          'Serves the caller’s agent over A2A: private (to callers with an API key of this Agentry), public (to anyone, with or without a key), or off. The agent must speak the chat protocol (409 otherwise): A2A messages reach it as chat messages.',
        params: AddressParams,
        body: A2aSettingRequest,
        response: { 200: A2aSetting, ...errorResponses(400, 401, 403, 404, 409, 422) },
      },
    },
    async (request) =>
      a2a.setAccess(
        request.principal as UserPrincipal,
        request.params.address,
        request.body.access,
      ),
  );
}

/**
 * Agents served over A2A (docs/a2a.md): each agent's card and its JSON-RPC endpoint (A2A 1.0,
 * and the 0.3 method names), answered by the A2A SDK's transport handlers over a request
 * handler for the agent and the caller; and the index of the public agents' cards.
 */
export const a2aRoutes: FastifyPluginAsync<{ ctx: AppContext }> = async (app, { ctx }) => {
  const { a2a } = ctx.services;
  // JSON that is not JSON-RPC, or not JSON at all, is the protocol's to answer.
  acceptJsonRpcBodies(app, ['application/json', 'application/a2a+json']);
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.get(
    '/.well-known/agent-cards.json',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['a2a'],
        summary: 'List Public Agent Cards',
        description:
          'The agent cards of the agents served over A2A to anyone, by address, a page at a time.',
        querystring: AgentCardsQuery,
        response: { 200: AgentCardsIndex, ...errorResponses(422) },
      },
    },
    async (request) => {
      const limit = request.query.limit ?? 50;
      const page = await a2a.publicCards(request.query.after ?? '', limit);
      return {
        agents: page.map((entry) => ({ ...entry, card: AgentCard.toJSON(entry.card) })),
        next_after: page.length < limit ? null : page.at(-1)!.address,
      };
    },
  );

  r.get(
    '/a2a/:address/.well-known/agent-card.json',
    {
      config: { auth: 'optional-user', about: { agent: 'params', field: 'address' } },
      schema: {
        tags: ['a2a'],
        summary: 'Get Agent Card',
        description:
          'The A2A agent card (A2A 1.0) of an agent its owner serves over A2A: with an API key when it is served privately (401 without), by anyone when publicly; 404 when it is not served.',
        params: A2aParams,
        response: {
          200: Type.Unknown({ description: 'the agent card' }),
          ...errorResponses(401, 403, 404, 422),
        },
      },
    },
    async (request, reply) => {
      const { card } = await a2a.serve(request.params.address, request.principal);
      void reply.header(
        'cache-control',
        request.principal.kind === 'user' ? 'private, max-age=60' : 'public, max-age=60',
      );
      return AgentCard.toJSON(card);
    },
  );

  const rpc = {
    config: { auth: 'optional-user', about: 'each-call' } as const,
    bodyLimit: ctx.config.bodyLimitBytes,
    schema: {
      tags: ['a2a'],
      summary: 'A2A JSON-RPC',
      description:
        'The A2A JSON-RPC endpoint of an agent its owner serves over A2A: SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask (A2A 1.0), and message/send, message/stream, tasks/get, tasks/cancel, tasks/resubscribe (0.3). A message is carried to the agent as a chat message; its reply is the answer. Streams are Server-Sent Events.',
      params: A2aParams,
      body: Type.Unknown({ description: 'one JSON-RPC 2.0 request' }),
      response: {
        200: Type.Unknown({ description: 'the JSON-RPC answer, as JSON or Server-Sent Events' }),
        ...errorResponses(401, 403, 404, 413, 422, 429),
        400: A2aRpcError,
        415: A2aRpcError,
      },
    },
  };
  r.post('/a2a/:address', rpc, async (request, reply) =>
    answer(request, reply, request.params.address),
  );
  // The card's URL ends without a slash; an A2A client given the agent's base URL with one
  // posts there.
  r.post(
    '/a2a/:address/',
    { ...rpc, schema: { ...rpc.schema, hide: true } },
    async (request, reply) => answer(request, reply, request.params.address),
  );

  async function answer(
    request: FastifyRequest,
    reply: FastifyReply,
    address: string,
  ): Promise<void> {
    const body: unknown = request.body;
    if (body === NOT_JSON_TYPE) {
      return rpcError(reply, 415, null, -32600, 'Send the JSON-RPC request as application/json');
    }
    if (body === NOT_JSON) return rpcError(reply, 400, null, -32700, 'Parse error: not JSON');
    const call = body as { id?: unknown; method?: unknown; params?: unknown } | null;
    const id = rpcId(call?.id);
    const method = typeof call?.method === 'string' ? call.method : undefined;
    if (method === undefined || typeof call !== 'object' || Array.isArray(call)) {
      return rpcError(
        reply,
        200,
        id,
        -32600,
        'Invalid Request: one JSON-RPC 2.0 request object with a method',
      );
    }
    if (call === null) return;
    const principal = request.principal;
    if (principal.kind === 'user' && principal.scope) {
      if (principal.scope.addresses !== null) {
        throw new ForbiddenError(
          'This API key is limited to agents; an A2A call speaks from the caller’s chat identity, which is a person’s or a team’s: use a key without addresses',
        );
      }
      if (principal.scope.readOnly && WRITE_METHODS.has(method)) {
        throw new ForbiddenError(
          `This API key is read-only: it may read tasks, not call ${method}. Use a key without read_only`,
        );
      }
    }
    if (SEND_METHODS.has(method)) {
      const refusal = messageRefusal(call.params);
      if (refusal) return rpcError(reply, 200, id, -32602, `Invalid params: ${refusal}`);
    }
    const served = await a2a.serve(address, principal);
    const legacy = isLegacyJsonRpcMethod(method);
    const header = request.headers[A2A_VERSION_HEADER.toLowerCase()];
    const requestedVersion =
      typeof header === 'string' && header !== ''
        ? header
        : legacy
          ? A2A_LEGACY_PROTOCOL_VERSION
          : A2A_PROTOCOL_VERSION;
    const extensions = request.headers[HTTP_EXTENSION_HEADER.toLowerCase()];
    const context = new ServerCallContext({
      user: served.caller,
      tenant: address,
      requestedVersion,
      requestedExtensions: Extensions.parseServiceParameter(
        typeof extensions === 'string' ? extensions : undefined,
      ),
    });
    const mapError = legacy
      ? LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError
      : JsonRpcTransportHandler.mapToJSONRPCError;
    let answered: Awaited<ReturnType<JsonRpcTransportHandler['handle']>>;
    try {
      validateVersion(requestedVersion, served.card, 'JSONRPC');
      const transport = legacy
        ? new LegacyJsonRpcTransportHandler(served.handler)
        : new JsonRpcTransportHandler(served.handler);
      answered = await transport.handle(call as Record<string, unknown>, context);
    } catch (err) {
      return rpcError(reply, 200, id, mapError(err));
    }
    if (!isStream(answered)) {
      return reply.code(200).type('application/json').send(answered);
    }
    await stream(request, reply, answered, {
      id,
      mapError,
      // 0.3's resubscribe answers as a stream even when nothing more comes.
      always: legacy && method === LEGACY_METHOD_TASKS_RESUBSCRIBE,
    });
  }
};

/** Writes a streamed answer as Server-Sent Events; a failure before the first is one JSON answer. */
async function stream(
  request: FastifyRequest,
  reply: FastifyReply,
  events: AsyncGenerator<unknown, void, undefined>,
  options: { id: string | number | null; mapError: (err: unknown) => unknown; always: boolean },
): Promise<void> {
  const iterator = events[Symbol.asyncIterator]();
  let first: IteratorResult<unknown, void>;
  try {
    first = await iterator.next();
  } catch (err) {
    if (!options.always) return rpcError(reply, 200, options.id, options.mapError(err));
    first = { done: true, value: undefined };
  }
  void reply.hijack();
  const res = reply.raw;
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (value !== undefined) res.setHeader(name, value as string | string[]);
  }
  res.writeHead(200, SSE_HEADERS);
  res.flushHeaders();
  // A caller gone stops the stream (the task goes on, and tasks/get reads it).
  let gone = false;
  res.once('close', () => {
    gone = true;
    void iterator.return?.();
  });
  try {
    if (!first.done) res.write(formatSSEEvent(first.value));
    while (!gone) {
      const next = await iterator.next();
      if (next.done) break;
      res.write(formatSSEEvent(next.value));
    }
  } catch (err) {
    request.log.warn({ err }, 'A2A stream ended by an error');
    if (!res.writableEnded) {
      res.write(
        formatSSEErrorEvent({ jsonrpc: '2.0', id: options.id, error: options.mapError(err) }),
      );
    }
  } finally {
    if (!res.writableEnded) res.end();
  }
}

/** Why the params of a message call cannot be carried to a uAgents agent; undefined when they can. */
function messageRefusal(params: unknown): string | undefined {
  const message = (params as { message?: { parts?: unknown } } | null | undefined)?.message;
  const parts = message?.parts;
  if (!Array.isArray(parts)) return undefined; // The SDK names what is missing.
  let length = 0;
  let texts = 0;
  for (const part of parts) {
    const text = (part as { text?: unknown } | null)?.text;
    if (typeof text !== 'string') continue;
    texts += 1;
    length += text.length;
  }
  if (texts === 0) {
    return 'the message has no text part: a uAgents agent is spoken to in text (files and data are not carried)';
  }
  if (length > A2A_TEXT_MAX_LENGTH) {
    return `the message's text is ${length} characters long, more than the ${A2A_TEXT_MAX_LENGTH} one chat message carries`;
  }
  return undefined;
}

function isStream(value: unknown): value is AsyncGenerator<unknown, void, undefined> {
  return (
    typeof (value as { [Symbol.asyncIterator]?: unknown })?.[Symbol.asyncIterator] === 'function'
  );
}

function rpcId(id: unknown): string | number | null {
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

/** A JSON-RPC error answer. */
function rpcError(
  reply: FastifyReply,
  status: number,
  id: string | number | null,
  codeOrError: number | unknown,
  message?: string,
): FastifyReply {
  const error =
    typeof codeOrError === 'number' ? { code: codeOrError, message: message! } : codeOrError;
  return reply.code(status).type('application/json').send({ jsonrpc: '2.0', id, error });
}
