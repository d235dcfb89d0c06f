import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../../metrics.js';

/** Records each request's latency, labelled by route pattern rather than URL. */
export function installMetrics(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onResponse', async (request, reply) => {
    metrics.httpDuration.observe(
      {
        method: request.method,
        route: request.routeOptions.url ?? 'unmatched',
        status: String(reply.statusCode),
      },
      reply.elapsedTime / 1000,
    );
  });
}
