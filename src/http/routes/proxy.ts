import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { EmptyObject, errorResponses } from '../../wire/common.js';
import { Envelope } from '../../wire/mailbox.js';
import { readinessProbe } from './readiness.js';

export function proxyRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const proxy = ctx.services.proxy;

  r.post(
    '/v2/agents/proxy/submit',
    {
      config: { auth: 'optional-user' },
      bodyLimit: ctx.config.envelopeBodyLimitBytes,
      schema: {
        tags: ['proxy'],
        summary: 'Proxy Message Envelope',
        description:
          'Forwards a signed envelope to the URL its target registered. With `x-uagents-connection: sync` the target’s reply is relayed unchanged; otherwise the answer is `{}`, also when the target could not be reached, timed out or failed (5xx, 429) and the envelope was kept in its mailbox to be forwarded again (unless its owner turned `keep_failed_forwards` off). Keeping is refused as a mailbox submit would be (406 for a quota).',
        body: Envelope,
        response: {
          200: EmptyObject,
          ...errorResponses(400, 401, 404, 406, 413, 422, 502, 504),
        },
      },
    },
    async (request, reply) => {
      const connection = request.headers['x-uagents-connection'];
      const relayed = await proxy.forward(
        request.body,
        request.principal,
        Array.isArray(connection) ? connection[0] : connection,
      );
      if (!relayed) return {};
      return reply.type(relayed.contentType).send(relayed.body);
    },
  );

  readinessProbe(
    app,
    {
      url: '/v2/agents/proxy/submit',
      tag: 'proxy',
      summary: 'Agent Readiness Probe',
      description:
        'Answers 200 while the service accepts messages for forwarding; `x-uagents-status` is `ready` when the agent named in `x-uagents-address` has a URL to forward to.',
    },
    (address) => proxy.isReady(address),
  );
}
