import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { AlmanacAgent } from '../../wire/almanac.js';
import { errorResponses } from '../../wire/common.js';
import {
  AgentGeoSearchCriteria,
  AgentSearchCriteria,
  AlmanacSearchRequest,
  AlmanacSearchResults,
  ResolveIdParams,
  SearchResults,
} from '../../wire/discovery.js';
import { almanacAgent } from '../views/almanac.js';

// Discovery: Almanac search (uAgents' broadcast), resolution of any identifier, and the
// Search API. Each group is added where the OpenAPI document lists it (src/app.ts).

/** Which agents serve a protocol (uAgents' broadcast), and the latest registrations. */
export function almanacSearchRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { discovery } = ctx.services;

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
}

/** An address, a handle or a domain, resolved to its agent's Almanac registration. */
export function resolveRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { discovery } = ctx.services;

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
}

/** The Search API: registry listings by text, filters and orderings, or by distance. */
export function searchRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { discovery } = ctx.services;

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
