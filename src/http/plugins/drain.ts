import type { FastifyInstance } from 'fastify';
import type { Lifecycle } from '../../infra/lifecycle.js';

/**
 * While the process drains, every answer closes its connection: clients (and the load
 * balancer in front) open their next request on a connection to another replica, and no
 * idle keep-alive connection is left for the shutdown to cut under a request being sent.
 */
export function installDrain(app: FastifyInstance, lifecycle: Lifecycle): void {
  app.addHook('onRequest', async (_request, reply) => {
    if (lifecycle.draining) void reply.header('connection', 'close');
  });
}
