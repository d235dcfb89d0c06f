import type { FastifyInstance, FastifyReply } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { ServiceUnavailableError } from '../../errors.js';
import { errorResponses } from '../../wire/common.js';

const Status = Type.Object({ status: Type.String() });

export function healthRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get(
    '/health',
    {
      config: { auth: 'none' },
      schema: { tags: ['operations'], summary: 'Liveness', response: { 200: Status } },
    },
    async () => ({ status: 'ok' }),
  );

  app.get(
    '/ready',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['operations'],
        summary: 'Readiness: the store answers',
        response: { 200: Status, ...errorResponses(503) },
      },
    },
    async (_request, reply) => {
      // Expected while draining: answered, not logged as a failure.
      if (ctx.lifecycle.draining) {
        return (reply as FastifyReply).code(503).send({ detail: 'Shutting down' });
      }
      if (!(await ctx.store.ping())) throw new ServiceUnavailableError('Store is not reachable');
      return { status: 'ready' };
    },
  );

  app.get(
    '/metrics',
    {
      config: { auth: 'none' },
      schema: { tags: ['operations'], summary: 'Prometheus metrics', hide: true },
    },
    async (_request, reply) => {
      const body = await ctx.metrics.registry.metrics();
      return reply.type(ctx.metrics.registry.contentType).send(body);
    },
  );
}
