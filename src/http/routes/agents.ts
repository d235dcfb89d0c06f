import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import {
  AGENTS_PAGE_SIZE,
  AgentList,
  AgentRecord,
  AgentUpdates,
  BatchRegistrationRequest,
  ListQuery,
  RegistrationRequest,
} from '../../wire/agents.js';
import { AddressParams, errorResponses, Success } from '../../wire/common.js';
import { userOf } from '../plugins/auth.js';
import { requireSame } from '../plugins/validation.js';
import { agentRecord } from '../views/agents.js';

export function agentsRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const agents = ctx.services.agents;

  r.get(
    '/v2/agents',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['agents'],
        summary: 'List Agents',
        description: "The caller's agents, oldest registration first.",
        querystring: ListQuery,
        response: { 200: AgentList, ...errorResponses(401, 422) },
      },
    },
    async (request) => {
      const { limit = AGENTS_PAGE_SIZE, offset = 0 } = request.query;
      return (await agents.list(userOf(request), limit, offset)).map(agentRecord);
    },
  );

  r.post(
    '/v2/agents',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['agents'],
        summary: 'Register Agent',
        description:
          'Creates or replaces the listing of an agent whose identity the caller has proven, and its mailbox.',
        body: RegistrationRequest,
        response: { 200: Success, ...errorResponses(401, 403, 406, 409, 422) },
      },
    },
    async (request) => {
      await agents.register(userOf(request), request.body);
      return { success: true };
    },
  );

  r.post(
    '/v2/agents/batch',
    {
      config: { auth: 'user' },
      bodyLimit: ctx.config.batchBodyLimitBytes,
      schema: {
        tags: ['agents'],
        summary: 'Register Agents In Batch',
        description:
          'Registers every agent in one transaction, or none when any is refused; the error names the item.',
        body: BatchRegistrationRequest,
        response: { 200: Success, ...errorResponses(401, 403, 406, 409, 413, 422) },
      },
    },
    async (request) => {
      await agents.registerBatch(userOf(request), request.body.agents ?? []);
      return { success: true };
    },
  );

  r.get(
    '/v2/agents/:address',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['agents'],
        summary: 'Get Agent',
        description: "One of the caller's agents; 404 for any other address.",
        params: AddressParams,
        response: { 200: AgentRecord, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => agentRecord(await agents.get(userOf(request), request.params.address)),
  );

  r.put(
    '/v2/agents/:address',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['agents'],
        summary: 'Update Agent Details',
        description: 'The fields given replace the stored ones.',
        params: AddressParams,
        body: AgentUpdates,
        response: { 200: AgentRecord, ...errorResponses(401, 404, 409, 422) },
      },
    },
    async (request) => {
      requireSame(request.body.address, request.params.address, {
        loc: ['body', 'address'],
        msg: 'address must equal the agent address in the path',
      });
      return agentRecord(await agents.update(userOf(request), request.body));
    },
  );

  r.delete(
    '/v2/agents/:address',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['agents'],
        summary: 'Delete Agent',
        description:
          'Removes the listing, its mailbox and pending messages, and releases the identity.',
        params: AddressParams,
        response: { 200: Success, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => {
      await agents.delete(userOf(request), request.params.address);
      return { success: true };
    },
  );
}
