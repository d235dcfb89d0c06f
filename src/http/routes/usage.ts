import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { errorResponses } from '../../wire/common.js';
import { UsageHistory, UsageHistoryQuery, UsageReport } from '../../wire/usage.js';
import { userOf } from '../plugins/auth.js';
import { usageReport } from '../../views/usage.js';

// The caller's usage against their limits. Each group is added where the OpenAPI document
// lists it (src/app.ts).

/** This month's counters and current totals, beside the limits. */
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

/** The counters of past months. */
export function usageHistoryRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.get(
    '/v2/agents/usage/history',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['usage'],
        summary: 'Get Usage History',
        description:
          "The caller's counters per month (or, with `by=day`, per day in UTC), most recent first; periods without any are left out.",
        querystring: UsageHistoryQuery,
        response: { 200: UsageHistory, ...errorResponses(401, 422) },
      },
    },
    async (request) => {
      const { by, months, days } = request.query;
      return by === 'day'
        ? ctx.services.usage.days(userOf(request), days ?? 30)
        : ctx.services.usage.history(userOf(request), months ?? 12);
    },
  );
}
