import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { agentInPath, type Principal, type UserPrincipal } from '../../auth/principal.js';
import type { AppContext } from '../../context.js';
import { answerHead, openEventStream, StreamSlots } from '../event-stream.js';
import { cursorId, kindFilter, parseCursor } from '../../services/activity/index.js';
import type { TimelineCursor } from '../../store/repositories/activity.js';
import {
  ActivityQuery,
  ActivityStats,
  AgentBatchEvents,
  EVENTS_BODY_LIMIT_BYTES,
  EventsAccepted,
  StatsQuery,
  StreamQuery,
  TimelinePage,
} from '../../wire/activity.js';
import { AddressParams, errorResponses } from '../../wire/common.js';
import { momentMs } from '../../wire/formats.js';
import { activityStats, timelineEntry } from '../../views/activity.js';

export function activityRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { activity, access } = ctx.services;
  const slots = new StreamSlots(ctx.config.streamsPerUser);

  r.post(
    '/v1/events',
    {
      config: { auth: 'agent' },
      bodyLimit: EVENTS_BODY_LIMIT_BYTES,
      schema: {
        tags: ['activity'],
        summary: 'Report Agent Events',
        description:
          'A registered agent reports events about itself (errors with their traceback, information, messages sent and received), as uagents-core sends them. An event id sent again is stored once. What could never fit is taken and counted: events past the first 100 of a batch are shed, texts past their limits are cut. Past the agent’s budget for the minute, 503 with `Retry-After` (the client retries a 5xx, and loses a batch answered with any other refusal). Agent attestation only.',
        body: AgentBatchEvents,
        response: { 200: EventsAccepted, ...errorResponses(401, 404, 413, 422, 503) },
      },
    },
    async (request) => {
      const { principal } = request;
      if (principal.kind !== 'agent') throw new Error('the auth plugin lets agents alone in');
      return activity.ingest(principal.address, request.body);
    },
  );

  const timelineOf = async (
    principal: Principal,
    query: ActivityQuery,
    address: string | undefined,
  ): Promise<TimelinePage> => {
    const { kind, since, until, peer, session, before, limit } = query;
    const page = await activity.timeline(principal, address, {
      ...(kind !== undefined ? { kind } : {}),
      ...(since !== undefined ? { since: momentMs(since) } : {}),
      ...(until !== undefined ? { until: momentMs(until) } : {}),
      ...(peer !== undefined ? { peer } : {}),
      ...(session !== undefined ? { session } : {}),
      ...(before !== undefined ? { before: parseCursor(before, 'before') } : {}),
      limit,
    });
    return {
      entries: page.rows.map(timelineEntry),
      next: page.next && cursorId(page.next),
    };
  };

  r.get(
    '/v2/agents/:address/activity',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['activity'],
        summary: 'Get Agent Activity',
        description:
          'The agent’s timeline, newest first: its delivery trace, the events it reported, registrations, Almanac changes, status changes and polling, from when the caller registered it. Owner only.',
        params: AddressParams,
        querystring: ActivityQuery,
        response: { 200: TimelinePage, ...errorResponses(400, 401, 404, 422) },
      },
    },
    (request) => timelineOf(request.principal, request.query, request.params.address),
  );

  r.get(
    '/v2/activity',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['activity'],
        summary: 'Get Activity Of All Agents',
        description: 'The timelines of all the caller’s agents in one, newest first.',
        querystring: ActivityQuery,
        response: { 200: TimelinePage, ...errorResponses(400, 401, 422) },
      },
    },
    (request) => timelineOf(request.principal, request.query, undefined),
  );

  const stream = async (
    request: FastifyRequest,
    query: StreamQuery,
    reply: FastifyReply,
    address: string | undefined,
  ): Promise<void> => {
    const scope = await activity.scopeFor(request.principal, address);
    const filter = kindFilter(query.kind);
    if (request.method === 'HEAD') return answerHead(reply);
    const principal = request.principal as UserPrincipal;
    const release = slots.take(principal.userId);
    const resumeFrom = request.headers['last-event-id'] ?? query.after;
    // Without a place to resume from, the stream starts after the newest entry there is.
    let start: TimelineCursor;
    try {
      start =
        typeof resumeFrom === 'string' && resumeFrom !== ''
          ? parseCursor(resumeFrom, 'Last-Event-ID')
          : ((await activity.timeline(principal, address, { limit: 1 })).rows[0] ?? {
              at: 0,
              source: 'a',
              id: 0,
            });
    } catch (err) {
      release();
      throw err;
    }
    openEventStream(reply, {
      release,
      hold: (finish) =>
        access.hold(
          'address' in scope
            ? { principal, agent: { address: scope.address, since: scope.since } }
            : { principal },
          finish,
        ),
      start: (stream) =>
        activity.live.openStream(
          scope,
          start,
          filter,
          (row) => stream.send({ id: cursorId(row), data: timelineEntry(row) }),
          (ended) => stream.finish(ended),
        ),
    });
  };

  r.get(
    '/v2/agents/:address/activity/stream',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['activity'],
        summary: 'Stream Agent Activity',
        description:
          'The agent’s timeline as it happens (Server-Sent Events: one `data:` JSON entry per event, its id as the event id). Resumes after the Last-Event-ID header (or `after`); without either, starts now. Owner only.',
        params: AddressParams,
        querystring: StreamQuery,
        response: { ...errorResponses(400, 401, 404, 422, 429) },
      },
    },
    (request, reply) => stream(request, request.query, reply, request.params.address),
  );

  r.get(
    '/v2/activity/stream',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['activity'],
        summary: 'Stream Activity Of All Agents',
        description: 'As the agent’s stream, for all the caller’s agents.',
        querystring: StreamQuery,
        response: { ...errorResponses(400, 401, 422, 429) },
      },
    },
    (request, reply) => stream(request, request.query, reply, undefined),
  );

  r.get(
    '/v2/agents/:address/activity/stats',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['activity'],
        summary: 'Get Agent Activity Stats',
        description:
          'The agent’s messages per hour or day (UTC): stored, refused, forwarded and failed forwards, the errors it reported, and the latency of its forwards (p50, p95), every bucket of the range, oldest first. Owner only.',
        params: AddressParams,
        querystring: StatsQuery,
        response: { 200: ActivityStats, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => {
      const { bucket, buckets } = request.query;
      const stats = await activity.stats(
        request.principal,
        request.params.address,
        bucket,
        buckets,
      );
      return activityStats(bucket, stats);
    },
  );
}
