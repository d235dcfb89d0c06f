import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { errorResponses, Success } from '../../wire/common.js';
import {
  CreateWebhookRequest,
  NewWebhook,
  UpdateWebhookRequest,
  Webhook,
  WebhookDeliveriesQuery,
  WebhookDelivery,
  WebhookDeliveryParams,
  WebhookDeliveryList,
  WebhookList,
  WebhookParams,
} from '../../wire/webhooks.js';
import { userOf } from '../plugins/auth.js';
import { newWebhookView, webhookDeliveryView, webhookView } from '../../views/webhooks.js';

/** The caller's webhooks (docs/webhooks.md): make, list, change, delete, test; their deliveries. */
export function webhooksRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { webhooks } = ctx.services;

  r.post(
    '/v2/webhooks',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['webhooks'],
        summary: 'Create Webhook',
        description:
          'A URL the service POSTs to, signed, when something of the chosen kinds happens to the caller’s agents (all of them, or those listed). The answer carries the signing secret, shown this once. At most 20 per user. A URL the server would refuse every delivery to (a private network address, unless the operator allows them) is answered 422 with the reason.',
        body: CreateWebhookRequest,
        response: { 201: NewWebhook, ...errorResponses(400, 401, 409, 422) },
      },
    },
    async (request, reply) => {
      const hook = await webhooks.create(userOf(request), request.body);
      return reply.code(201).send(newWebhookView(hook));
    },
  );

  r.get(
    '/v2/webhooks',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['webhooks'],
        summary: 'List Webhooks',
        description: 'The caller’s webhooks, oldest first; secrets are never shown again.',
        response: { 200: WebhookList, ...errorResponses(401) },
      },
    },
    async (request) => (await webhooks.list(userOf(request))).map(webhookView),
  );

  r.get(
    '/v2/webhooks/:id',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['webhooks'],
        summary: 'Get Webhook',
        description: 'One of the caller’s webhooks; another user’s is answered 404.',
        params: WebhookParams,
        response: { 200: Webhook, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => webhookView(await webhooks.get(userOf(request), request.params.id)),
  );

  r.put(
    '/v2/webhooks/:id',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['webhooks'],
        summary: 'Update Webhook',
        description:
          'Replaces the fields given (url, kinds, agents, description); the secret stays. Deliveries already made keep the URL they are sent to from their next attempt on.',
        params: WebhookParams,
        body: UpdateWebhookRequest,
        response: { 200: Webhook, ...errorResponses(400, 401, 404, 422) },
      },
    },
    async (request) =>
      webhookView(await webhooks.update(userOf(request), request.params.id, request.body)),
  );

  r.delete(
    '/v2/webhooks/:id',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['webhooks'],
        summary: 'Delete Webhook',
        description: 'The webhook stops at once, and its deliveries, sent or waiting, go with it.',
        params: WebhookParams,
        response: { 200: Success, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => {
      await webhooks.remove(userOf(request), request.params.id);
      return { success: true };
    },
  );

  r.get(
    '/v2/webhooks/:id/deliveries',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['webhooks'],
        summary: 'List Webhook Deliveries',
        description:
          'The webhook’s recent deliveries, newest first: what each was about, how its attempts went and when the next is due, and what its last attempt sent (headers and body) and was answered (status, headers, the start of the body) in how long. Kept for the retention period of messages.',
        params: WebhookParams,
        querystring: WebhookDeliveriesQuery,
        response: { 200: WebhookDeliveryList, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) =>
      (await webhooks.deliveries(userOf(request), request.params.id, request.query)).map(
        webhookDeliveryView,
      ),
  );

  r.post(
    '/v2/webhooks/:id/test',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['webhooks'],
        summary: 'Test Webhook',
        description:
          'Sends a `webhook.test` delivery now and answers it as its first attempt left it; a failed one is retried like any other.',
        params: WebhookParams,
        response: { 200: WebhookDelivery, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => webhookDeliveryView(await webhooks.test(userOf(request), request.params.id)),
  );

  r.post(
    '/v2/webhooks/:id/deliveries/:delivery/redeliver',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['webhooks'],
        summary: 'Redeliver Webhook Delivery',
        description:
          'Sends the event of one of the webhook’s deliveries again now, as a new delivery (a new id; `redelivery_of` and the agentry-redelivery-of header name the one sent again), and answers it as its first attempt left it; a failed one is retried like any other.',
        params: WebhookDeliveryParams,
        response: { 200: WebhookDelivery, ...errorResponses(401, 404, 409, 422) },
      },
    },
    async (request) =>
      webhookDeliveryView(
        await webhooks.redeliver(userOf(request), request.params.id, request.params.delivery),
      ),
  );
}
