import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { EmptyObject, errorResponses } from '../../wire/common.js';
import { Interaction } from '../../wire/interactions.js';

export function interactionsRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.post(
    '/v2/agents/interactions',
    {
      config: { auth: 'agent-body-source' },
      schema: {
        tags: ['agents'],
        summary: 'Record Agent Interaction',
        description:
          'The `source` agent (whose attestation authorises the call) reports an interaction with `target`, kept for its owner’s statistics.',
        body: Interaction,
        response: { 200: EmptyObject, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) => {
      await ctx.services.interactions.record(request.body);
      return {};
    },
  );
}
