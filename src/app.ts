import { randomUUID } from 'node:crypto';
import cookie from '@fastify/cookie';
import cors from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { AppContext } from './context.js';
import { RateLimitedError } from './errors.js';
import { installAuth, rateLimitKey, type RefusalHook } from './http/plugins/auth.js';
import { installClients, isProxysOwnRequest } from './http/plugins/clients.js';
import { installDrain } from './http/plugins/drain.js';
import {
  clientErrorHandler,
  frameworkErrors,
  installErrorHandling,
  installJsonParser,
} from './http/plugins/errors.js';
import { installMetrics } from './http/plugins/metrics.js';
import { installOpenApi } from './http/plugins/openapi.js';
import { requestLoggerFactory } from './http/plugins/request-logger.js';
import { sharedSerializers } from './http/plugins/serialization.js';
import { installValidation } from './http/plugins/validation.js';
import { agentsRoutes } from './http/routes/agents.js';
import { a2aRoutes, a2aSettingRoutes } from './http/routes/a2a.js';
import { chatRoutes } from './http/routes/chat.js';
import { a2aExternalRoutes } from './http/routes/a2a-external.js';
import { federationRoutes } from './http/routes/federation.js';
import { almanacRoutes } from './http/routes/almanac.js';
import { deliveriesRoutes } from './http/routes/deliveries.js';
import { enrolmentsRoutes } from './http/routes/enrolments.js';
import { almanacSearchRoutes, resolveRoutes, searchRoutes } from './http/routes/search.js';
import { almanacDomainsRoutes, domainsRoutes } from './http/routes/domains.js';
import { healthRoutes } from './http/routes/health.js';
import { probesRoutes } from './http/routes/probes.js';
import { identityRoutes } from './http/routes/identity.js';
import { interactionsRoutes } from './http/routes/interactions.js';
import { activityRoutes } from './http/routes/activity.js';
import { keysRoutes } from './http/routes/keys.js';
import { hostingRoutes } from './http/routes/hosting.js';
import { teamsRoutes } from './http/routes/teams.js';
import { mailboxRoutes } from './http/routes/mailbox.js';
import { handlesRoutes } from './http/routes/handles.js';
import { mailroomRoutes } from './http/routes/mailroom.js';
import { mcpRoutes } from './http/routes/mcp.js';
import { proxyRoutes } from './http/routes/proxy.js';
import { sessionsRoutes } from './http/routes/sessions.js';
import { storageAssetsRoutes } from './http/routes/storage-assets.js';
import { usageHistoryRoutes, usageRoutes } from './http/routes/usage.js';
import { webRoutes } from './http/routes/web.js';
import { webhooksRoutes } from './http/routes/webhooks.js';
import { version } from './version.js';

/**
 * Builds the HTTP application around a context. It never listens: the Server does, and
 * tests call `inject` or listen on port 0.
 */
export async function buildApp(ctx: AppContext): Promise<FastifyInstance> {
  const { config } = ctx;
  const app = Fastify({
    loggerInstance: ctx.logger as FastifyBaseLogger,
    // One debug line per request (below) instead of two info lines: cheaper on the hot path.
    logController: new LogController({ disableRequestLogging: true }),
    // Each request's child logger is made when the request first logs, not when it arrives.
    childLoggerFactory: requestLoggerFactory,
    requestIdHeader: 'x-request-id',
    // `request.ip` is the client's: behind a trusted proxy, the first untrusted hop of
    // X-Forwarded-For (see installClients); with none trusted, the socket's address.
    trustProxy: ctx.trustedProxies.none
      ? false
      : (address: string) => ctx.trustedProxies.trusts(address),
    genReqId: requestId,
    bodyLimit: config.bodyLimitBytes,
    // Requests arriving while the server closes are answered by the hook below, with `detail`.
    return503OnClosing: false,
    frameworkErrors,
    clientErrorHandler,
    ...serverTimeouts(config),
    schemaController: { compilersFactory: { buildSerializer: sharedSerializers } },
  });

  // Set as soon as close() begins (before the listening socket closes): requests still arriving
  // on open connections are turned away with 503 and the connection is closed after the answer.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', async (request, reply) => {
    void reply.header('x-request-id', request.id);
    if (closing) {
      return reply
        .code(503)
        .header('connection', 'close')
        .type('application/json')
        .send({ detail: 'Service Unavailable: the server is shutting down' });
    }
  });
  installClients(app, {
    trusted: ctx.trustedProxies,
    header: config.forwardedHeader,
    maxRequestsPerClient: config.maxConnectionsPerAddress,
    logger: ctx.logger,
    refused: (client) =>
      ctx.logger.debug({ client }, 'request refused: too many in progress from this client'),
  });
  // Every request at debug, or at info when asked for (AGENTRY_LOG_REQUESTS): the lines about
  // what happens to agents are the info level's own.
  const logRequest = config.logRequests ? 'info' : 'debug';
  app.addHook('onResponse', async (request, reply) => {
    request.log[logRequest](
      {
        method: request.method,
        url: request.url,
        status: reply.statusCode,
        ms: reply.elapsedTime,
        client: request.ip,
      },
      'request',
    );
  });

  installDrain(app, ctx.lifecycle);
  // Held mailbox polls would keep close() waiting for their hold limit, and activity streams
  // for ever: end them first (a stream's client reconnects, to another replica if there is one).
  app.addHook('preClose', async () => {
    ctx.endHeldPolls();
    ctx.services.activity.endStreams();
  });

  installErrorHandling(app);
  installJsonParser(app);
  installValidation(app);
  installMetrics(app, ctx.metrics);
  // A preflight without the headers that make it one is refused before CORS sees it, which
  // would refuse it in plain text: every error answer is JSON.
  app.addHook('onRequest', async (request, reply) => {
    if (
      request.method === 'OPTIONS' &&
      (!request.headers.origin || !request.headers['access-control-request-method'])
    ) {
      return reply.code(400).type('application/json').send({
        detail:
          'Invalid preflight request: an OPTIONS request needs the Origin and Access-Control-Request-Method headers (browsers send them; other clients need not send OPTIONS at all).',
      });
    }
  });
  await app.register(cors, {
    origin: '*',
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS'],
    // One string, not a list: a list is joined again for every request.
    exposedHeaders: 'x-request-id, x-uagents-status, retry-after, mcp-session-id',
  });
  let countRefusal: RefusalHook | undefined;
  if (config.rateLimit.max > 0) {
    await app.register(rateLimit, {
      max: config.rateLimit.max,
      timeWindow: config.rateLimit.windowMs,
      // Counted once the caller is authenticated (the auth hook runs first): per user or agent,
      // else per client address. A refused credential counts against the address.
      hook: 'preValidation',
      keyGenerator: rateLimitKey,
      // A trusted proxy's own requests (its health checks: it forwards no one) are never
      // refused: a proxy that saw 429 from /ready would take every replica out of rotation.
      allowList: isProxysOwnRequest,
      errorResponseBuilder: (_request, context) =>
        new RateLimitedError(Math.max(1, Math.ceil(context.ttl / 1000))),
      // Shared by the replicas through Redis when configured, else this process's own.
      ...(ctx.rateLimits && { store: ctx.rateLimits.storeClass() }),
    });
    const limit = app.rateLimit();
    countRefusal = async (request, reply) => {
      await limit.call(app, request, reply);
    };
  }
  await installOpenApi(app, version);
  // Set by the routes that sign in and out; read only where used (sessionCookie).
  await app.register(cookie, { hook: false });
  installAuth(app, {
    keys: ctx.services.keys,
    attestations: ctx.attestations,
    countRefusal,
    sessions: ctx.services.sessions,
    publicUrl: config.publicUrl,
    agentCalled: (address) => ctx.services.deliveries.seen(address, 'call'),
    mailroom: ctx.services.mailroom,
    teams: ctx.services.teams,
  });

  // The OpenAPI document lists paths in the order their routes are added: a resource whose
  // paths it lists in two places adds them in two groups. (A team's variant of a path,
  // `…/teams/{slug}/…`, follows the path it repeats: see installOpenApi.)
  healthRoutes(app, ctx);
  identityRoutes(app, ctx);
  agentsRoutes(app, ctx);
  enrolmentsRoutes(app, ctx);
  usageRoutes(app, ctx);
  mailboxRoutes(app, ctx);
  proxyRoutes(app, ctx);
  mailroomRoutes(app, ctx);
  interactionsRoutes(app, ctx);
  deliveriesRoutes(app, ctx);
  activityRoutes(app, ctx);
  probesRoutes(app, ctx);
  webhooksRoutes(app, ctx);
  await storageAssetsRoutes(app, ctx);
  almanacRoutes(app, ctx);
  almanacSearchRoutes(app, ctx);
  almanacDomainsRoutes(app, ctx);
  handlesRoutes(app, ctx);
  resolveRoutes(app, ctx);
  domainsRoutes(app, ctx);
  searchRoutes(app, ctx);
  sessionsRoutes(app, ctx);
  keysRoutes(app, ctx);
  teamsRoutes(app, ctx);
  // The Hosting API, for the caller and again for a team the path names; the document lists
  // each team path right after the caller's.
  await app.register(hostingRoutes, { prefix: '/v1/hosting', ctx, owner: 'caller' });
  await app.register(hostingRoutes, {
    prefix: '/v1/hosting/teams/:slug',
    ctx,
    owner: 'team-in-path',
  });
  usageHistoryRoutes(app, ctx);
  chatRoutes(app, ctx);
  a2aExternalRoutes(app, ctx);
  await app.register(mcpRoutes, { ctx });
  a2aSettingRoutes(app, ctx);
  await app.register(a2aRoutes, { ctx });
  federationRoutes(app, ctx);
  await webRoutes(app, undefined, { allowPrivateTargets: config.allowPrivateTargets });

  return app;
}

/**
 * A request's id: a random UUID, made flat. `randomUUID()` joins its text from pieces, which V8
 * keeps as a tree of those pieces (about 450 bytes, against 56 for the flat text) until
 * something reads it by index; and a request keeps its id for as long as it lasts, a held
 * mailbox poll for minutes.
 */
function requestId(): string {
  const id = randomUUID();
  // Reading a character flattens the string in place.
  id.charCodeAt(0);
  return id;
}

/**
 * How long clients may take to send requests and keep idle connections (docs/operations.md):
 * slow or silent connections are closed instead of holding sockets. Node checks them on an
 * interval, here a fraction of the shortest timeout.
 */
function serverTimeouts(config: AppContext['config']) {
  return {
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    http: {
      headersTimeout: config.headersTimeoutMs,
      connectionsCheckingInterval: Math.max(
        10,
        Math.min(1000, Math.floor(config.headersTimeoutMs / 4)),
      ),
    },
  };
}
