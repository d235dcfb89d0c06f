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
  SearchAgent,
  SearchAgentParams,
  SearchAgentQuery,
  SearchFeedback,
  SearchFeedbackRecorded,
  SearchResults,
  SearchTags,
} from '../../wire/search.js';
import { almanacAgent } from '../../views/almanac.js';

// Search: Almanac search (uAgents' broadcast), resolution of any identifier, and the
// Search API. Each group is added where the OpenAPI document lists it (src/app.ts).

/** Which agents serve a protocol (uAgents' broadcast), and the latest registrations. */
export function almanacSearchRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { search } = ctx.services;

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
    (request) => search.searchAlmanac(request.body.text, request.body.offset, request.body.limit),
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
    () => search.recentAlmanac(),
  );
}

/** An address, a handle or a domain, resolved to its agent's Almanac registration. */
export function resolveRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { search } = ctx.services;

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
    async (request) => almanacAgent(await search.resolve(request.params.id)),
  );
}

/**
 * The Search API (the generated search client's paths, and uAgents' experimental module's):
 * registry listings by text, filters and orderings, or by distance; one listed agent; the
 * tags listings carry; and which agent a client selected among the answers of a search.
 */
export function searchRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { search } = ctx.services;

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
            'Registry listings ranked by the full-text relevance of names, handles, descriptions and readmes, or ordered by creation, modification or interactions; `address:<agent1…>` finds one agent. Every filter is applied; a relevancy `cutoff` drops the matches scoring below its share of the best one, and `semantic_search` is served by the same full-text ranking. The answer is kept for a day under its `search_id`, for `POST /v1/search/agents/click`.',
          body: AgentSearchCriteria,
          response: { 200: SearchResults, ...errorResponses(422) },
        },
      },
      (request) => search.searchAgents(request.body),
    );
  }

  r.get(
    '/v1/search/agents/tags',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['search'],
        summary: 'List Agent Tags',
        description:
          'The tags listed agents carry (`metadata.tags` of the listing or its Almanac registration, in lower case), most used first; at most 1,000.',
        response: { 200: SearchTags },
      },
    },
    () => search.tags(),
  );

  r.post(
    '/v1/search/agents/click',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['search'],
        summary: 'Record Search Feedback',
        description:
          'Records that the agent at `address` was selected among the answers of the search `search_id` (on page `page_index`). 404 when that search is unknown or no longer kept (a day); 422 when it did not answer that agent.',
        body: SearchFeedback,
        response: { 200: SearchFeedbackRecorded, ...errorResponses(404, 422) },
      },
    },
    (request) => search.recordClick(request.body),
  );

  for (const path of ['/v1/search/agents/geo', '/v1/search/geo']) {
    r.post(
      path,
      {
        config: { auth: 'none' },
        schema: {
          tags: ['search'],
          summary: 'Search Agents by Location',
          description:
            'Listings whose metadata carries a geolocation whose area overlaps the circle given: nearest first when sorted by relevancy, with the other filters as for `POST /v1/search/agents`.',
          body: AgentGeoSearchCriteria,
          response: { 200: SearchResults, ...errorResponses(422) },
        },
      },
      (request) => search.searchGeo(request.body),
    );
  }

  r.get(
    '/v1/search/agents/:address',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['search'],
        summary: 'Get Agent',
        description:
          'One listed agent as search shows it. 404 when it has no listing, or when `contract` names the other network than its Almanac registration.',
        params: SearchAgentParams,
        querystring: SearchAgentQuery,
        response: { 200: SearchAgent, ...errorResponses(404, 422) },
      },
    },
    (request) => search.searchAgent(request.params.address, request.query.contract),
  );
}
