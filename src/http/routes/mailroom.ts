import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { agentInPath, agentInBody } from '../../auth/principal.js';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { UnauthenticatedError } from '../../errors.js';
import {
  AddressParams,
  EmptyObject,
  errorResponses,
  isoTimestamp,
  Success,
} from '../../wire/common.js';
import { Envelope, StoredEnvelope } from '../../wire/mailbox.js';
import {
  V1AccessToken,
  V1Agent,
  V1AgentPage,
  V1AgentUpdates,
  V1ChallengeProof,
  V1ChallengeRequest,
  V1ChallengeResponse,
  V1_PAGE_SIZE,
  V1MailboxPage,
  V1MessageParams,
  V1PageQuery,
  V1RegistrationRequest,
} from '../../wire/mailroom.js';
import type { PendingMessage } from '../../store/repositories/mailbox.js';
import { userOf } from '../plugins/auth.js';
import { storedEnvelopeJson } from '../../views/mailbox.js';
import { v1Agent, v1MailboxPageJson } from '../../views/mailroom.js';
import { sendJsonText } from './mailbox.js';
import { forwardSubmitted } from './proxy.js';
import { readinessProbe } from './readiness.js';

const TAG = 'v1 mailroom';

/** The agent a v1 access token stands for, on a route whose requirement is `agent-token`. */
function agentOf(request: FastifyRequest): string {
  const { principal } = request;
  if (principal.kind !== 'agent') throw new UnauthenticatedError();
  return principal.address;
}

/**
 * The v1 mailroom (docs/mailbox.md, "v1 mailroom"): the calls of uAgents 0.22 and earlier,
 * answered by the services of v2 (one registry, one mailbox).
 */
export function mailroomRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { mailroom, mailbox, proxy, agents } = ctx.services;

  r.post(
    '/v1/auth/challenge',
    {
      config: { auth: 'optional-user', about: agentInBody() },
      schema: {
        tags: [TAG],
        summary: 'Get Access Challenge',
        description:
          'A single-use challenge for the address, valid for minutes. Without a key it is for the agent itself (POST /v1/auth/prove); with a user’s API key it is bound to that user too (POST /v1/agents).',
        body: V1ChallengeRequest,
        response: { 200: V1ChallengeResponse, ...errorResponses(401, 422) },
      },
    },
    async (request) => ({
      challenge: await mailroom.issueChallenge(request.principal, request.body.address),
    }),
  );

  r.post(
    '/v1/auth/prove',
    {
      config: { auth: 'none' },
      schema: {
        tags: [TAG],
        summary: 'Prove Agent Key For Access Token',
        description:
          'Exchanges the agent’s signature of its challenge for a short-lived access token bound to its address, sent as `Authorization: token <access_token>` to the v1 mailbox.',
        body: V1ChallengeProof,
        response: { 200: V1AccessToken, ...errorResponses(400, 422) },
      },
    },
    async (request) => {
      const issued = await mailroom.prove(request.body);
      return { access_token: issued.token, expiry: isoTimestamp(issued.expiresAt) };
    },
  );

  r.get(
    '/v1/mailbox',
    {
      config: { auth: 'agent-token' },
      schema: {
        tags: [TAG],
        summary: 'List Mailbox Messages (v1)',
        description:
          'The calling agent’s pending, unexpired messages, oldest first: the same mailbox as `GET /v2/agents/{address}/mailbox`, never held. 404 while the agent is not registered.',
        querystring: V1PageQuery,
        response: { 200: V1MailboxPage, ...errorResponses(401, 404, 406, 422) },
      },
    },
    (request, reply) => {
      const { page = 1, size = V1_PAGE_SIZE } = request.query;
      mailbox.poll(
        request.principal,
        agentOf(request),
        { limit: size, offset: (page - 1) * size },
        { hold: false, charge: request.method !== 'HEAD' },
        (err: unknown, messages: PendingMessage[]) => {
          if (err !== null) {
            void (reply as FastifyReply).send(err);
            return;
          }
          void (reply as FastifyReply)
            .type('application/json')
            .send(v1MailboxPageJson(messages, page, size));
        },
      );
    },
  );

  r.delete(
    '/v1/mailbox',
    {
      config: { auth: 'agent-token' },
      schema: {
        tags: [TAG],
        summary: 'Delete All Mailbox Messages (v1)',
        description:
          'Acknowledges every message waiting for the calling agent: none is listed again.',
        response: { 200: EmptyObject, ...errorResponses(401, 404) },
      },
    },
    async (request) => {
      await mailbox.deleteAll(request.principal, agentOf(request));
      return {};
    },
  );

  r.get(
    '/v1/mailbox/:uuid',
    {
      config: { auth: 'agent-token' },
      schema: {
        tags: [TAG],
        summary: 'Get Mailbox Message (v1)',
        description:
          'One of the calling agent’s pending, unexpired messages, as `GET /v2/agents/{address}/mailbox/{uuid}` answers it.',
        params: V1MessageParams,
        response: { 200: StoredEnvelope, ...errorResponses(401, 404, 406, 422) },
      },
    },
    async (request, reply) => {
      const message = await mailbox.get(
        request.principal,
        agentOf(request),
        request.params.uuid,
        request.method !== 'HEAD',
      );
      return sendJsonText(reply, storedEnvelopeJson(message));
    },
  );

  r.delete(
    '/v1/mailbox/:uuid',
    {
      config: { auth: 'agent-token' },
      schema: {
        tags: [TAG],
        summary: 'Delete Mailbox Message (v1)',
        description: 'Acknowledges one of the calling agent’s messages: it is never listed again.',
        params: V1MessageParams,
        response: { 200: EmptyObject, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => {
      await mailbox.delete(request.principal, agentOf(request), request.params.uuid);
      return {};
    },
  );

  r.post(
    '/v1/agents',
    {
      config: { auth: 'user', about: agentInBody() },
      schema: {
        tags: [TAG],
        summary: 'Register Agent (v1)',
        description:
          'Proves the agent’s key with the challenge issued to the caller (POST /v1/auth/challenge with the API key), then registers it and opens its mailbox, as POST /v2/identity and POST /v2/agents do. An agent of the caller registered already keeps its listing; `endpoint` becomes the URL the proxy forwards to (none for a mailbox agent).',
        body: V1RegistrationRequest,
        response: { 200: Success, ...errorResponses(400, 401, 403, 406, 409, 422) },
      },
    },
    async (request) => {
      await mailroom.register(userOf(request), request.body);
      return { success: true };
    },
  );

  r.get(
    '/v1/agents',
    {
      config: { auth: 'user' },
      schema: {
        tags: [TAG],
        summary: 'List Agents (v1)',
        description:
          'The caller’s agents in the v1 shape, oldest registration first: the same agents as `GET /v2/agents`.',
        querystring: V1PageQuery,
        response: { 200: V1AgentPage, ...errorResponses(401, 422) },
      },
    },
    async (request) => {
      const { page = 1, size = V1_PAGE_SIZE } = request.query;
      const listed = await agents.list(userOf(request), size, (page - 1) * size);
      return { items: listed.map(v1Agent), total: null, page, size, pages: null };
    },
  );

  r.get(
    '/v1/agents/:address',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: [TAG],
        summary: 'Get Agent (v1)',
        description:
          'One of the caller’s agents in the v1 shape; 404 when the caller has no such agent.',
        params: AddressParams,
        response: { 200: V1Agent, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => v1Agent(await agents.get(userOf(request), request.params.address)),
  );

  r.put(
    '/v1/agents/:address',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: [TAG],
        summary: 'Update Agent Details (v1)',
        description:
          'Sets the name, and the readme, avatar URL and short description (the profile’s description) given; null keeps the stored value.',
        params: AddressParams,
        body: V1AgentUpdates,
        response: { 200: V1Agent, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) =>
      v1Agent(await mailroom.update(userOf(request), request.params.address, request.body)),
  );

  r.delete(
    '/v1/agents/:address',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: [TAG],
        summary: 'Delete Agent (v1)',
        description:
          'Removes the listing, its mailbox and pending messages, and releases the identity, as DELETE /v2/agents/{address} does.',
        params: AddressParams,
        response: { 200: EmptyObject, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => {
      await mailroom.delete(userOf(request), request.params.address);
      return {};
    },
  );

  r.post(
    '/v1/submit',
    {
      config: { auth: 'optional-user' },
      bodyLimit: ctx.config.envelopeBodyLimitBytes,
      schema: {
        tags: [TAG],
        summary: 'Submit Message Envelope (v1)',
        description:
          'The endpoint 0.22 mailbox agents advertise: the same as POST /v2/agents/mailbox/submit.',
        body: Envelope,
        response: { 200: EmptyObject, ...errorResponses(400, 401, 404, 406, 413, 422) },
      },
    },
    async (request) => {
      await mailbox.submit(request.body, request.principal);
      return {};
    },
  );

  readinessProbe(
    app,
    {
      url: '/v1/submit',
      tag: TAG,
      summary: 'Mailbox Agent Readiness Probe (v1)',
      description: 'The same as the probe of /v2/agents/mailbox/submit.',
    },
    (address) => mailbox.isReady(address),
  );

  r.post(
    '/v1/proxy/submit',
    {
      config: { auth: 'optional-user' },
      bodyLimit: ctx.config.envelopeBodyLimitBytes,
      schema: {
        tags: [TAG],
        summary: 'Proxy Message Envelope (v1)',
        description:
          'The endpoint 0.22 proxy agents advertise: the same as POST /v2/agents/proxy/submit.',
        body: Envelope,
        response: {
          200: EmptyObject,
          ...errorResponses(400, 401, 404, 406, 413, 422, 502, 504),
        },
      },
    },
    (request, reply) => forwardSubmitted(proxy, request.body, request, reply),
  );

  readinessProbe(
    app,
    {
      url: '/v1/proxy/submit',
      tag: TAG,
      summary: 'Agent Readiness Probe (v1)',
      description: 'The same as the probe of /v2/agents/proxy/submit.',
    },
    (address) => proxy.isReady(address),
  );
}
