import type { FastifyInstance } from 'fastify';
import { agentInPath } from '../../auth/principal.js';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { BadRequestError } from '../../errors.js';
import { AddressParams, errorResponses } from '../../wire/common.js';
import {
  DELIVERY_EVENTS,
  DeliveryEventView,
  DeliveryParams,
  DeliveryQuery,
  DigestQuery,
} from '../../wire/deliveries.js';
import { deliveryEventView } from '../../views/deliveries.js';

const MESSAGE_EVENTS = DELIVERY_EVENTS.filter((event) => event !== 'interaction');

export function deliveriesRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const trace = ctx.services.deliveries;

  r.get(
    '/v2/agents/:address/deliveries',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['mailbox'],
        summary: 'List Delivery Trace',
        description:
          'What happened to the agent’s messages (submitted, stored, refused, polled, deleted, expired, quarantined, forwarded, delivered) and the interactions it reported, oldest first. Owner only.',
        params: AddressParams,
        querystring: DeliveryQuery,
        response: {
          200: Type.Array(DeliveryEventView),
          ...errorResponses(400, 401, 404, 422),
        },
      },
    },
    async (request) => {
      const { since, status, kind, limit, offset } = request.query;
      let sinceMs: number | undefined;
      if (since !== undefined) {
        sinceMs = Date.parse(since);
        if (Number.isNaN(sinceMs)) throw new BadRequestError('since is not an ISO-8601 moment');
      }
      const events = status
        ? [status]
        : kind === 'interaction'
          ? ['interaction']
          : kind === 'message'
            ? MESSAGE_EVENTS
            : undefined;
      const rows = await trace.list(request.principal, request.params.address, {
        ...(sinceMs !== undefined ? { since: sinceMs } : {}),
        ...(events ? { events } : {}),
        limit,
        offset,
      });
      return rows.map(deliveryEventView);
    },
  );

  r.get(
    '/v2/agents/:address/deliveries/:uuid',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['mailbox'],
        summary: 'Get Message Delivery Trace',
        description: 'Everything recorded for one message to the agent, oldest first. Owner only.',
        params: DeliveryParams,
        response: {
          200: Type.Array(DeliveryEventView),
          ...errorResponses(401, 404, 422),
        },
      },
    },
    async (request) => {
      const rows = await trace.message(
        request.principal,
        request.params.address,
        request.params.uuid,
      );
      return rows.map(deliveryEventView);
    },
  );

  r.get(
    '/v2/deliveries',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['mailbox'],
        summary: 'Find Delivery Trace by Envelope Digest',
        description:
          'The trace of the message with this envelope digest to `target`, for the owner of its sender or of its target.',
        querystring: DigestQuery,
        response: {
          200: Type.Array(DeliveryEventView),
          ...errorResponses(401, 404, 422),
        },
      },
    },
    async (request) => {
      const { digest, target } = request.query;
      const rows = await trace.byDigest(request.principal, digest.toLowerCase(), target);
      return rows.map(deliveryEventView);
    },
  );
}
