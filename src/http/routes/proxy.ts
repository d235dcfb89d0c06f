import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { EmptyObject } from '../schemas/common.js';

export function proxyRoutes(app: FastifyInstance, _ctx: AppContext): void {
  app.route({
    method: ['GET', 'HEAD'],
    url: '/v2/agents/proxy/submit',
    config: { auth: 'none' },
    schema: {
      tags: ['proxy'],
      summary: 'Agent Readiness Probe',
      description: 'Answers 200 while the service accepts messages for forwarding.',
      response: { 200: EmptyObject },
    },
    handler: async () => ({}),
  });
}
