import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { UserPrincipal } from '../../auth/principal.js';
import type { AppContext } from '../../context.js';
import { answerHead, openEventStream, StreamSlots } from '../event-stream.js';
import { BadRequestError } from '../../errors.js';
import {
  ChatEntriesQuery,
  ChatEntry,
  ChatIdentity,
  ChatSession,
  ChatSessionParams,
  ChatSessionsQuery,
  OpenChatRequest,
  SendChatAnswer,
  SendChatRequest,
} from '../../wire/chat.js';
import { errorResponses } from '../../wire/common.js';
import { chatEntryView, chatIdentityView, chatSessionView } from '../../views/chat.js';

/** An entry id as the API spells it; a 400 naming `what` when it is not one. */
function entryId(value: string | undefined, what: string): number {
  if (value === undefined || value === '') return 0;
  if (!/^[0-9]{1,15}$/.test(value)) throw new BadRequestError(`${what} is not an entry id`);
  return Number(value);
}

// Chat for people (docs/chat.md): sessions with agents, what was said in them, and each
// session live. What a caller owns is theirs (or their team's, with x-team); another's is 404.
export function chatRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { chat, access } = ctx.services;
  const slots = new StreamSlots(ctx.config.streamsPerUser);

  r.get(
    '/v2/chat/identity',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['chat'],
        summary: 'Get Chat Identity',
        description:
          'The agent address the caller chats from (made the first time it is asked for): agents see it as the sender of the caller’s messages and answer it. Agentry holds its key.',
        response: { 200: ChatIdentity, ...errorResponses(401, 403, 503) },
      },
    },
    async (request) => {
      const principal = request.principal as UserPrincipal;
      return chatIdentityView(await chat.identity(principal.userId));
    },
  );

  r.post(
    '/v2/chat/sessions',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['chat'],
        summary: 'Open Chat Session',
        description:
          'Opens a session with an agent, named by its address, a name it holds or its handle. Nothing is sent until the first message.',
        body: OpenChatRequest,
        response: { 201: ChatSession, ...errorResponses(400, 401, 403, 404, 409, 422, 503) },
      },
    },
    async (request, reply) => {
      const session = await chat.open(request.principal, request.body.agent);
      return reply.code(201).send(chatSessionView(session));
    },
  );

  r.get(
    '/v2/chat/sessions',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['chat'],
        summary: 'List Chat Sessions',
        description: 'The caller’s sessions, the most recently active first.',
        querystring: ChatSessionsQuery,
        response: { 200: Type.Array(ChatSession), ...errorResponses(401, 403, 422) },
      },
    },
    async (request) => {
      const { limit = 20, offset = 0, agent } = request.query;
      const rows = await chat.list(request.principal, {
        limit,
        offset,
        ...(agent !== undefined ? { agent } : {}),
      });
      return rows.map(chatSessionView);
    },
  );

  r.get(
    '/v2/chat/sessions/:id',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['chat'],
        summary: 'Get Chat Session',
        params: ChatSessionParams,
        response: { 200: ChatSession, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) => chatSessionView(await chat.get(request.principal, request.params.id)),
  );

  r.get(
    '/v2/chat/sessions/:id/messages',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['chat'],
        summary: 'Read Chat Session',
        description:
          'What was said in the session, both ways, oldest first: messages, the agent’s acknowledgements, and failures to deliver. Pages with `after` (an entry id).',
        params: ChatSessionParams,
        querystring: ChatEntriesQuery,
        response: { 200: Type.Array(ChatEntry), ...errorResponses(400, 401, 403, 404, 422) },
      },
    },
    async (request) => {
      const { after, limit = 50 } = request.query;
      const rows = await chat.history(
        request.principal,
        request.params.id,
        entryId(after, 'after'),
        limit,
      );
      return rows.map(chatEntryView);
    },
  );

  r.post(
    '/v2/chat/sessions/:id/messages',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['chat'],
        summary: 'Send Chat Message',
        description:
          'Sends a chat protocol message to the session’s agent, by the road any envelope takes (its mailbox, its proxy or its endpoint). Answers the message’s entry and, when it could not be delivered, the failure’s; the agent’s acknowledgement and replies arrive on the session’s stream.',
        params: ChatSessionParams,
        body: SendChatRequest,
        response: {
          201: SendChatAnswer,
          ...errorResponses(400, 401, 403, 404, 406, 409, 422, 503),
        },
      },
    },
    async (request, reply) => {
      const sent = await chat.send(request.principal, request.params.id, request.body);
      return reply.code(201).send({
        message: chatEntryView(sent.message),
        failure: sent.failure && chatEntryView(sent.failure),
      });
    },
  );

  r.post(
    '/v2/chat/sessions/:id/end',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['chat'],
        summary: 'End Chat Session',
        description: 'Tells the agent the session ends; nothing more can be sent in it.',
        params: ChatSessionParams,
        response: { 200: ChatSession, ...errorResponses(401, 403, 404, 406, 422, 503) },
      },
    },
    async (request) => chatSessionView(await chat.end(request.principal, request.params.id)),
  );

  r.get(
    '/v2/chat/sessions/:id/stream',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['chat'],
        summary: 'Follow Chat Session',
        description:
          'The session as it happens (Server-Sent Events): each entry as one event, named by its kind (`message`, `acknowledgement`, `failure`), its id the entry id, its data the entry. Resumes after the Last-Event-ID header (or `after`); without either, starts from the beginning.',
        params: ChatSessionParams,
        querystring: Type.Pick(ChatEntriesQuery, ['after']),
        response: { ...errorResponses(400, 401, 403, 404, 422, 429) },
      },
    },
    async (request, reply) => {
      const principal = request.principal as UserPrincipal;
      const session = await chat.get(principal, request.params.id);
      const resumeFrom = request.headers['last-event-id'] ?? request.query.after;
      const after = entryId(
        typeof resumeFrom === 'string' ? resumeFrom : undefined,
        'Last-Event-ID',
      );
      if (request.method === 'HEAD') return answerHead(reply);
      const release = slots.take(principal.userId);
      openEventStream(reply, {
        release,
        // Ends, saying why, when the key, console session, membership or team that let it open does.
        hold: (finish) => access.hold({ principal }, finish),
        start: (stream) =>
          chat.follow(session.id, after, (row) => {
            const entry = chatEntryView(row);
            stream.send({ id: String(entry.id), event: entry.kind, data: entry });
          }),
      });
    },
  );
}
