import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { userOf } from '../plugins/auth.js';
import { errorResponses } from '../../wire/common.js';
import { UsageReport, usageReport } from '../../wire/usage.js';

export function usageRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get(
    '/v2/agents/usage/current',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['usage'],
        summary: 'Get User Usage',
        description:
          "This month's counters, current totals and the limits of the caller, with the period's end.",
        response: { 200: UsageReport, ...errorResponses(401) },
      },
    },
    async (request) => usageReport(await ctx.services.usage.report(userOf(request))),
  );
}
