import type { FastifyInstance } from 'fastify';
import { agentInPath, agentInBody } from '../../auth/principal.js';
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
import { agentRecord } from '../../views/agents.js';
import type { StoredAgent } from '../../store/repositories/agents.js';

export function agentsRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { agents, activity, enrolments } = ctx.services;
  /** Each agent as the API shows it, with its status now. */
  const records = async (list: StoredAgent[]) => {
    const statuses = await activity.statuses(list.map((agent) => agent.address));
    return list.map((agent) => agentRecord(agent, statuses.get(agent.address)!));
  };
  const record = async (agent: StoredAgent) => (await records([agent]))[0]!;

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
      return records(await agents.list(userOf(request), limit, offset));
    },
  );

  r.post(
    '/v2/agents',
    {
      config: { auth: 'user-or-agent', about: agentInBody() },
      schema: {
        tags: ['agents'],
        summary: 'Register Agent',
        description:
          'Creates or replaces the listing of an agent whose identity the caller has proven, and its mailbox. An enrolled agent (POST /v2/enrolments) may register itself with its own attestation (`Authorization: Agent …`), under the user it is enrolled to; one nobody enrolled is refused (403) unless the operator opened self-registration.',
        body: RegistrationRequest,
        response: { 200: Success, ...errorResponses(401, 403, 406, 409, 422) },
      },
    },
    async (request) => {
      if (request.principal.kind === 'agent') {
        // The auth plugin has checked that the agent registers itself.
        const owner = await enrolments.ownerForSelfRegistration(request.body.address, request.body);
        await agents.registerSelf(owner, request.body);
      } else {
        await agents.register(userOf(request), request.body);
      }
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
      config: { auth: 'user-or-agent', about: agentInPath() },
      schema: {
        tags: ['agents'],
        summary: 'Get Agent',
        description:
          "One of the caller's agents; 404 for any other address. An agent may read its own record with its attestation: 200 tells it that it is registered here (uAgents then sends its events).",
        params: AddressParams,
        response: { 200: AgentRecord, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const { principal } = request;
      const { address } = request.params;
      // The auth plugin has checked that an agent asks about itself.
      const agent =
        principal.kind === 'agent'
          ? await agents.getOwn(address)
          : await agents.get(userOf(request), address);
      return record(agent);
    },
  );

  r.put(
    '/v2/agents/:address',
    {
      config: { auth: 'user-or-agent', about: agentInPath() },
      schema: {
        tags: ['agents'],
        summary: 'Update Agent Details',
        description:
          'The fields given replace the stored ones. An enrolled agent may update itself with its own attestation.',
        params: AddressParams,
        body: AgentUpdates,
        response: { 200: AgentRecord, ...errorResponses(401, 403, 404, 409, 422) },
      },
    },
    async (request) => {
      requireSame(request.body.address, request.params.address, {
        loc: ['body', 'address'],
        msg: 'address must equal the agent address in the path',
      });
      const owner =
        request.principal.kind === 'agent'
          ? await enrolments.ownerForSelfRegistration(request.params.address)
          : userOf(request);
      return record(await agents.update(owner, request.body));
    },
  );

  r.delete(
    '/v2/agents/:address',
    {
      config: { auth: 'user', about: agentInPath() },
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
