import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { EmptyObject, errorResponses } from '../../wire/common.js';
import {
  Domain,
  DomainCreate,
  DomainList,
  DomainListQuery,
  DomainNameParams,
  DomainPathParams,
  DomainUpdate,
  NameAvailability,
  NameAvailabilityQuery,
} from '../../wire/domains.js';
import { userOf } from '../plugins/auth.js';
import { domainView } from '../../views/domains.js';

// Names (domains): what the Almanac answers about a name, and the names a user owns. Each
// group is added where the OpenAPI document lists it (src/app.ts).

/** A name's agents, as uAgents resolves a name to send to it, and whether a name is free. */
export function almanacDomainsRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { domains } = ctx.services;

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
}

/** The caller's names: claim one, assign agents to it, release it. */
export function domainsRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { domains } = ctx.services;

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
}
