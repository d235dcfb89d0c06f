import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { agentInPath } from '../../auth/principal.js';
import type { AppContext } from '../../context.js';
import { probesView } from '../../views/probes.js';
import { errorResponses, Success } from '../../wire/common.js';
import { AgentProbes, ProbesParams, ProbesRequest } from '../../wire/probes.js';

/** Active health: probes an owner asks for, and what they found (docs/activity.md, "Health"). */
export function probesRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { probes } = ctx.services;

  r.get(
    '/v2/agents/:address/probes',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['agents'],
        summary: 'Get Agent Health',
        description:
          "Whether the caller asked for health probes of the agent, and what they found: whether it answers, how fast, and the share of the last 24 hours' probes it answered.",
        params: ProbesParams,
        response: { 200: AgentProbes, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) => probesView(await probes.get(request.principal, request.params.address)),
  );

  r.put(
    '/v2/agents/:address/probes',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['agents'],
        summary: 'Probe Agent Health',
        description:
          "Turns health probes on for the agent (or changes how often): every `interval_seconds`, Agentry sends it a chat message from the caller's chat identity, which it answers by acknowledging it. Probes count as messages the caller sends.",
        params: ProbesParams,
        body: ProbesRequest,
        response: { 200: AgentProbes, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) =>
      probesView(
        await probes.enable(
          request.principal,
          request.params.address,
          request.body.interval_seconds,
        ),
      ),
  );

  r.delete(
    '/v2/agents/:address/probes',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['agents'],
        summary: 'Stop Probing Agent Health',
        description: 'Turns health probes off for the agent and forgets what they found.',
        params: ProbesParams,
        response: { 200: Success, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) => {
      await probes.disable(request.principal, request.params.address);
      return { success: true };
    },
  );
}
