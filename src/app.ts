import { createHash, randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import cors from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { AppContext } from './context.js';
import { RateLimitedError } from './errors.js';
import { installAuth } from './http/plugins/auth.js';
import { installErrorHandling, installJsonParser } from './http/plugins/errors.js';
import { installMetrics } from './http/plugins/metrics.js';
import { installOpenApi } from './http/plugins/openapi.js';
import { installValidation } from './http/plugins/validation.js';
import { agentsRoutes } from './http/routes/agents.js';
import { almanacRoutes } from './http/routes/almanac.js';
import { healthRoutes } from './http/routes/health.js';
import { identityRoutes } from './http/routes/identity.js';
import { interactionRoutes } from './http/routes/interactions.js';
import { mailboxRoutes } from './http/routes/mailbox.js';
import { proxyRoutes } from './http/routes/proxy.js';
import { usageRoutes } from './http/routes/usage.js';

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };
export { version };

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
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
    bodyLimit: config.bodyLimitBytes,
    return503OnClosing: true,
  });

  app.addHook('onRequest', async (request, reply) => {
    void reply.header('x-request-id', request.id);
  });
  app.addHook('onResponse', async (request, reply) => {
    request.log.debug(
      { method: request.method, url: request.url, status: reply.statusCode, ms: reply.elapsedTime },
      'request',
    );
  });

  installErrorHandling(app);
  installJsonParser(app);
  installValidation(app);
  installMetrics(app, ctx.metrics);
  await app.register(cors, {
    origin: '*',
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS'],
    exposedHeaders: ['x-request-id', 'x-uagents-status', 'retry-after'],
  });
  if (config.rateLimit.max > 0) {
    await app.register(rateLimit, {
      max: config.rateLimit.max,
      timeWindow: config.rateLimit.windowMs,
      // Per credential when one is presented, else per client address.
      keyGenerator: (request) => {
        const credential = request.headers.authorization;
        return credential
          ? `credential:${createHash('sha256').update(credential).digest('base64url')}`
          : `ip:${request.ip}`;
      },
      errorResponseBuilder: (_request, context) =>
        new RateLimitedError(Math.max(1, Math.ceil(context.ttl / 1000))),
    });
  }
  await installOpenApi(app, version);
  installAuth(app, { users: ctx.services.users, attestations: ctx.attestations });

  healthRoutes(app, ctx);
  identityRoutes(app, ctx);
  agentsRoutes(app, ctx);
  usageRoutes(app, ctx);
  mailboxRoutes(app, ctx);
  proxyRoutes(app, ctx);
  interactionRoutes(app, ctx);
  almanacRoutes(app, ctx);

  return app;
}
