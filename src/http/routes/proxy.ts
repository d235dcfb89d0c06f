import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import type { ProxyService } from '../../services/proxy.js';
import { EmptyObject, errorResponses } from '../../wire/common.js';
import { Envelope } from '../../wire/mailbox.js';
import { ProxyEndpoint, ProxyResolveParams } from '../../wire/proxy.js';
import { readinessProbe } from './readiness.js';

/**
 * Forwards a submitted envelope (`POST /v2/agents/proxy/submit` and its v1 twin): with
 * `x-uagents-connection: sync` the target's reply is relayed unchanged, otherwise `{}`.
 */
export async function forwardSubmitted(
  proxy: ProxyService,
  envelope: Envelope,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<unknown> {
  const connection = request.headers['x-uagents-connection'];
  const relayed = await proxy.forward(
    envelope,
    request.principal,
    Array.isArray(connection) ? connection[0] : connection,
  );
  if (!relayed) return {};
  return reply.type(relayed.contentType).send(relayed.body);
}

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
    (request, reply) => forwardSubmitted(proxy, request.body, request, reply),
  );

  r.get(
    '/v1/proxy/resolve/:agent_address',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['proxy'],
        summary: 'Get Proxy Agent Endpoint',
        description:
          'Where a sender reaches a proxy agent: this proxy’s submit URL, for an agent with a URL to forward to; 404 for an agent without one, or not registered here. The agent’s own URL is shown to its owner alone (`GET /v2/agents/{address}`).',
        params: ProxyResolveParams,
        response: { 200: ProxyEndpoint, ...errorResponses(404, 422) },
      },
    },
    (request) => proxy.resolve(request.params.agent_address),
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
