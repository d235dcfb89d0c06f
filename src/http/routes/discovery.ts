import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import type { DomainWithAgents } from '../../store/repositories/domains.js';
import { almanacAgent, AlmanacAgent } from '../../wire/almanac.js';
import { EmptyObject, errorResponses } from '../../wire/common.js';
import {
  AgentGeoSearchCriteria,
  AgentSearchCriteria,
  AlmanacSearchRequest,
  AlmanacSearchResults,
  Domain,
  DomainCreate,
  DomainList,
  DomainListQuery,
  DomainNameParams,
  DomainPathParams,
  DomainUpdate,
  NameAvailability,
  NameAvailabilityQuery,
  ResolveIdParams,
  SearchResults,
} from '../../wire/discovery.js';
import { userOf } from '../plugins/auth.js';

function domainView(domain: DomainWithAgents): Domain {
  return {
    name: domain.name,
    status: 'Registered',
    expiry: null,
    assigned_agents: domain.agents,
  };
}

/** Almanac search (broadcast), names, resolution of any identifier, and the Search API. */
export function discoveryRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { discovery, domains } = ctx.services;

  r.post(
    '/v1/almanac/search',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Search Agents',
        description:
          'A protocol digest (with or without `proto:`) answers every registration declaring it; other text the registrations of agents whose name or description matches. Active agents first.',
        body: AlmanacSearchRequest,
        response: { 200: AlmanacSearchResults, ...errorResponses(422) },
      },
    },
    (request) =>
      discovery.searchAlmanac(request.body.text, request.body.offset, request.body.limit),
  );

  r.get(
    '/v1/almanac/recent',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Get Recently Registered Agents',
        description: 'The 100 unexpired registrations stored last, newest first.',
        response: { 200: AlmanacSearchResults },
      },
    },
    () => discovery.recentAlmanac(),
  );

  r.get(
    '/v1/almanac/domains/:name',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Resolve Domain',
        description:
          'The agents assigned to a name, with their weights; uAgents picks one by weight to send to `name`.',
        params: DomainNameParams,
        response: { 200: Domain, ...errorResponses(404, 422) },
      },
    },
    async (request) => domainView(await domains.get(request.params.name)),
  );

  r.get(
    '/v1/almanac/search/available_name',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Check Name Availability',
        querystring: NameAvailabilityQuery,
        response: { 200: NameAvailability, ...errorResponses(422) },
      },
    },
    async (request) => ({
      name: request.query.name,
      available: await domains.isAvailable(request.query.name),
    }),
  );

  r.get(
    '/v2/almanac/resolve/:id',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Resolve Identifier',
        description:
          'An agent address, a handle or a domain, resolved to the Almanac registration of its agent (a domain: one of its agents, by weight). 404 when the identifier is not assigned.',
        params: ResolveIdParams,
        response: { 200: AlmanacAgent, ...errorResponses(404, 422) },
      },
    },
    async (request) => almanacAgent(await discovery.resolve(request.params.id)),
  );

  r.get(
    '/v2/users/domains',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['domains'],
        summary: 'Get User Domains',
        querystring: DomainListQuery,
        response: { 200: DomainList, ...errorResponses(401, 422) },
      },
    },
    async (request) =>
      (await domains.list(userOf(request), request.query.agent_address)).map(domainView),
  );

  r.post(
    '/v2/users/domains',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['domains'],
        summary: 'Create User Domain',
        description:
          "Claims a free name for the caller and assigns the caller's agents to it (weight 1 unless given).",
        body: DomainCreate,
        response: { 201: Domain, ...errorResponses(401, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const created = await domains.create(
        { userId: userOf(request) },
        request.body.domain_name,
        request.body.agent_records ?? [],
      );
      return reply.code(201).send(domainView(created));
    },
  );

  r.put(
    '/v2/users/domains/:domain_name',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['domains'],
        summary: 'Update User Domain',
        description: 'Replaces the agents assigned to a name the caller owns.',
        params: DomainPathParams,
        body: DomainUpdate,
        response: { 200: Domain, ...errorResponses(401, 403, 404, 409, 422) },
      },
    },
    async (request) =>
      domainView(
        await domains.update(
          { userId: userOf(request) },
          request.params.domain_name,
          request.body.agent_records ?? [],
        ),
      ),
  );

  r.delete(
    '/v2/users/domains/:domain_name',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['domains'],
        summary: 'Delete User Domain',
        params: DomainPathParams,
        response: { 200: EmptyObject, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) => {
      await domains.remove({ userId: userOf(request) }, request.params.domain_name);
      return {};
    },
  );

  for (const path of ['/v1/search/agents', '/v1/search']) {
    r.post(
      path,
      {
        config: { auth: 'none' },
        schema: {
          tags: ['search'],
          summary:
            path === '/v1/search' ? 'Search Agents (uagents.experimental.search)' : 'Search Agents',
          description:
            'Registry listings ranked by the full-text relevance of names, handles, descriptions and readmes, or ordered by creation, modification or interactions; `address:<agent1…>` finds one agent.',
          body: AgentSearchCriteria,
          response: { 200: SearchResults, ...errorResponses(422) },
        },
      },
      async (request) => ({ agents: await discovery.searchAgents(request.body) }),
    );
  }

  r.post(
    '/v1/search/geo',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['search'],
        summary: 'Search Agents by Location',
        description:
          'Listings whose metadata carries a geolocation whose area overlaps the circle given, nearest first.',
        body: AgentGeoSearchCriteria,
        response: { 200: SearchResults, ...errorResponses(422) },
      },
    },
    async (request) => ({ agents: await discovery.searchGeo(request.body) }),
  );
}
