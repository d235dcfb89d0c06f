import type { FastifyInstance, FastifyReply } from 'fastify';
import { agentInPath } from '../../auth/principal.js';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import { Departure } from '../../infra/held-polls.js';
import { AddressParams, EmptyObject, errorResponses } from '../../wire/common.js';
import {
  Envelope,
  MailboxQuery,
  MessageParams,
  QuarantinedEnvelope,
  StoredEnvelope,
} from '../../wire/mailbox.js';
import { quarantinedEnvelopeView, storedEnvelopeJson } from '../../views/mailbox.js';
import { readinessProbe } from './readiness.js';

/** Sends JSON text as is; the route's response schema documents its shape. */
export function sendJsonText(reply: FastifyReply, json: string): FastifyReply {
  return reply.type('application/json').send(json);
}

export function mailboxRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const mailbox = ctx.services.mailbox;

  r.post(
    '/v2/agents/mailbox/submit',
    {
      config: { auth: 'optional-user' },
      bodyLimit: ctx.config.envelopeBodyLimitBytes,
      schema: {
        tags: ['mailbox'],
        summary: 'Submit Message Envelope',
        description:
          'Stores a signed envelope for a registered agent; a 200 means it is committed. Submitting the same envelope again stores nothing new.',
        body: Envelope,
        response: { 200: EmptyObject, ...errorResponses(400, 401, 404, 406, 413, 422) },
      },
    },
    async (request) => {
      await mailbox.submit(request.body, request.principal);
      return {};
    },
  );

  readinessProbe(
    app,
    {
      url: '/v2/agents/mailbox/submit',
      tag: 'mailbox',
      summary: 'Mailbox Agent Readiness Probe',
      description:
        'Answers 200 while the service accepts messages; `x-uagents-status` is `ready` when the agent named in `x-uagents-address` has a mailbox.',
    },
    (address) => mailbox.isReady(address),
  );

  r.get(
    '/v2/agents/:address/mailbox',
    {
      config: { auth: 'user-or-agent', about: agentInPath() },
      schema: {
        tags: ['mailbox'],
        summary: 'List Mailbox Messages',
        description:
          'Pending, unexpired messages, oldest first. The bytes returned count towards the transfer quota; a HEAD request counts none. When an agent polls its empty mailbox, the answer waits until a message arrives or the hold limit passes (then it is empty).',
        params: AddressParams,
        querystring: MailboxQuery,
        response: {
          200: Type.Array(StoredEnvelope),
          ...errorResponses(401, 403, 404, 406, 422),
        },
      },
    },
    (request, reply) => {
      // A held poll stops waiting when its client goes away.
      const departure = new Departure();
      const onClose = (): void => departure.leave();
      reply.raw.on('close', onClose);
      // Answered from a callback rather than awaited: thousands of polls may be held at once,
      // and each would keep a suspended handler, or a chain of promises, while it waits.
      mailbox.poll(
        request.principal,
        request.params.address,
        request.query,
        {
          hold: request.method === 'GET',
          departure,
          // HEAD runs this handler too, but sends no body: it is not charged as a transfer.
          charge: request.method !== 'HEAD',
        },
        (err, messages) => {
          reply.raw.off('close', onClose);
          try {
            if (err !== null) throw err;
            // Stopping: this connection must not stay open, idle, until its keep-alive ends.
            // Draining: the next poll goes to another replica.
            if (mailbox.holdsEnded || ctx.lifecycle.draining) {
              void reply.header('connection', 'close');
            }
            sendJsonText(reply, `[${messages.map(storedEnvelopeJson).join(',')}]`);
          } catch (failure) {
            // Sent, an error goes through the error handler as a thrown one does.
            void (reply as FastifyReply).send(failure);
          }
        },
      );
    },
  );

  r.get(
    '/v2/agents/:address/mailbox/:uuid',
    {
      config: { auth: 'user-or-agent', about: agentInPath() },
      schema: {
        tags: ['mailbox'],
        summary: 'Get Mailbox Message',
        params: MessageParams,
        response: { 200: StoredEnvelope, ...errorResponses(401, 403, 404, 406, 422) },
      },
    },
    async (request, reply) => {
      const message = await mailbox.get(
        request.principal,
        request.params.address,
        request.params.uuid,
        request.method !== 'HEAD',
      );
      return sendJsonText(reply, storedEnvelopeJson(message));
    },
  );

  r.delete(
    '/v2/agents/:address/mailbox/:uuid',
    {
      config: { auth: 'user-or-agent', about: agentInPath() },
      schema: {
        tags: ['mailbox'],
        summary: 'Delete Mailbox Message',
        description: 'Acknowledges a message: it is never listed again.',
        params: MessageParams,
        response: { 200: EmptyObject, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) => {
      await mailbox.delete(request.principal, request.params.address, request.params.uuid);
      return {};
    },
  );

  r.get(
    '/v2/agents/:address/mailbox/quarantine',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['mailbox'],
        summary: 'List Quarantined Messages',
        description:
          'Messages moved out of the mailbox because the agent’s client cannot take them, with the reason, oldest first. Owner only; they count in no quota and expire like the others.',
        params: AddressParams,
        querystring: MailboxQuery,
        response: {
          200: Type.Array(QuarantinedEnvelope),
          ...errorResponses(401, 404, 422),
        },
      },
    },
    async (request) => {
      const messages = await mailbox.listQuarantined(
        request.principal,
        request.params.address,
        request.query,
      );
      return messages.map(quarantinedEnvelopeView);
    },
  );

  r.delete(
    '/v2/agents/:address/mailbox/quarantine/:uuid',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['mailbox'],
        summary: 'Delete Quarantined Message',
        params: MessageParams,
        response: { 200: EmptyObject, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => {
      await mailbox.deleteQuarantined(
        request.principal,
        request.params.address,
        request.params.uuid,
      );
      return {};
    },
  );
}
