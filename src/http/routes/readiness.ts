import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { EmptyObject } from '../../wire/common.js';
import { canonicalAgentAddress } from '../../wire/formats.js';

const ReadinessHeaders = Type.Object({
  'x-uagents-address': Type.Optional(Type.String()),
});

/**
 * A uAgents readiness probe (GET and HEAD): 200 `{}` while the service accepts messages,
 * and `x-uagents-status` saying whether the agent named in `x-uagents-address` can receive
 * them — `indeterminate` when no agent is named. `isReady` gets a canonical address.
 */
export function readinessProbe(
  app: FastifyInstance,
  route: { url: string; tag: string; summary: string; description: string },
  isReady: (address: string) => Promise<boolean>,
): void {
  app.withTypeProvider<TypeBoxTypeProvider>().route({
    method: ['GET', 'HEAD'],
    url: route.url,
    config: { auth: 'none' },
    schema: {
      tags: [route.tag],
      summary: route.summary,
      description: route.description,
      headers: ReadinessHeaders,
      response: { 200: EmptyObject },
    },
    handler: async (request, reply) => {
      const named = request.headers['x-uagents-address'];
      let status = 'indeterminate';
      if (named !== undefined) {
        // Anything but an agent address names no agent that could be ready.
        const address = canonicalAgentAddress(named);
        status = address !== undefined && (await isReady(address)) ? 'ready' : 'not-ready';
      }
      void reply.header('x-uagents-status', status);
      return {};
    },
  });
}
