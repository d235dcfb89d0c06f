import type { FastifyInstance } from 'fastify';
import { agentInPath } from '../../auth/principal.js';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { errorResponses, Success } from '../../wire/common.js';
import {
  ENROLMENTS_PAGE_SIZE,
  EnrolmentList,
  EnrolmentListQuery,
  EnrolmentParams,
  ProvisionedAgent,
  ProvisionRequest,
} from '../../wire/enrolments.js';
import { userOf } from '../plugins/auth.js';
import { enrolmentView, provisionedAgentView } from '../../views/enrolments.js';

/** Provisioning agents for the agentverse-sdk: Agent URIs and the addresses they enrol. */
export function enrolmentsRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { enrolments } = ctx.services;

  r.post(
    '/v2/enrolments',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['agents'],
        summary: 'Provision Agent',
        description:
          "Makes an agent key (or takes the caller's `seed`), enrols its address to the caller and answers the Agent URI for the agentverse-sdk, shown this once: the key is not stored. The agent started from it registers itself (POST /v2/agents with its own attestation) under the caller. Provisioning the same seed again renames the enrolment.",
        body: ProvisionRequest,
        response: { 200: ProvisionedAgent, ...errorResponses(401, 403, 409, 422) },
      },
    },
    async (request) =>
      provisionedAgentView(await enrolments.provision(userOf(request), request.body)),
  );

  r.get(
    '/v2/enrolments',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['agents'],
        summary: 'List Enrolled Agents',
        description: 'The addresses the caller enrolled, oldest first; their keys are never shown.',
        querystring: EnrolmentListQuery,
        response: { 200: EnrolmentList, ...errorResponses(401, 403, 422) },
      },
    },
    async (request) => {
      const { limit = ENROLMENTS_PAGE_SIZE, offset = 0 } = request.query;
      return (await enrolments.list(userOf(request), limit, offset)).map(enrolmentView);
    },
  );

  r.delete(
    '/v2/enrolments/:address',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['agents'],
        summary: 'End Enrolment',
        description:
          'The agent may no longer register or update itself; its listing, if any, stays until deleted (DELETE /v2/agents/{address}).',
        params: EnrolmentParams,
        response: { 200: Success, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) => {
      await enrolments.remove(userOf(request), request.params.address);
      return { success: true };
    },
  );
}
