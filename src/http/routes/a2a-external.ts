import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { agentInPath } from '../../auth/principal.js';
import type { AppContext } from '../../context.js';
import { externalAgentView } from '../../views/a2a-external.js';
import {
  ExternalAgent,
  ExternalAgentRequest,
  ExternalAgentsQuery,
} from '../../wire/a2a-external.js';
import { AddressParams, errorResponses } from '../../wire/common.js';

// External A2A agents (docs/a2a.md, "Inward"): registered by their card's URL, reached
// by uAgents agents at an address Agentry holds. What a caller owns is theirs; another's is 404.
export function a2aExternalRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { externalA2a } = ctx.services;

  r.post(
    '/v2/a2a/external-agents',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['a2a'],
        summary: 'Register External A2A Agent',
        description:
          'Reads the A2A agent card at `card_url` (A2A 1.0 or 0.3) and lists the agent under a new agent address whose key Agentry holds: it appears in search with its skills, and uAgents agents reach it with the chat protocol. A card that cannot be read, is not a card, or names no JSON-RPC interface Agentry may reach is refused (422), and nothing is registered.',
        body: ExternalAgentRequest,
        response: { 201: ExternalAgent, ...errorResponses(401, 403, 406, 409, 422, 503) },
      },
    },
    async (request, reply) => {
      const row = await externalA2a.register(request.principal, request.body);
      return reply.code(201).send(externalAgentView(row));
    },
  );

  r.get(
    '/v2/a2a/external-agents',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['a2a'],
        summary: 'List External A2A Agents',
        description: 'The caller’s external A2A agents, the most recently registered first.',
        querystring: ExternalAgentsQuery,
        response: { 200: Type.Array(ExternalAgent), ...errorResponses(401, 403, 422) },
      },
    },
    async (request) => {
      const { limit = 20, offset = 0 } = request.query;
      return (await externalA2a.list(request.principal, { limit, offset })).map(externalAgentView);
    },
  );

  r.get(
    '/v2/a2a/external-agents/:address',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['a2a'],
        summary: 'Get External A2A Agent',
        params: AddressParams,
        response: { 200: ExternalAgent, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) =>
      externalAgentView(await externalA2a.get(request.principal, request.params.address)),
  );

  r.post(
    '/v2/a2a/external-agents/:address/refresh',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['a2a'],
        summary: 'Refresh External A2A Agent',
        description:
          'Reads the agent’s card again: a changed name, description, skills or interface replaces the one kept (and its search entry). A card that no longer passes is refused (422) and the one kept stays.',
        params: AddressParams,
        response: { 200: ExternalAgent, ...errorResponses(401, 403, 404, 409, 422, 503) },
      },
    },
    async (request) =>
      externalAgentView(await externalA2a.refresh(request.principal, request.params.address)),
  );

  r.delete(
    '/v2/a2a/external-agents/:address',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['a2a'],
        summary: 'Delete External A2A Agent',
        description:
          'Removes the agent’s listing, its search entry and the key Agentry held for it, as deleting the agent does.',
        params: AddressParams,
        response: { 204: Type.Null(), ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      await externalA2a.unregister(request.principal, request.params.address);
      return reply.code(204).send(null);
    },
  );
}
