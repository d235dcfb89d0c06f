import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { isoTimestamp, errorResponses } from '../../wire/common.js';
import { Success } from '../../wire/agents.js';
import {
  ApiKey,
  apiKeyView,
  CreateApiKeyRequest,
  KeyParams,
  NewApiKey,
  SessionInfo,
  SignInRequest,
  UsageHistory,
  UsageHistoryQuery,
} from '../../wire/console.js';
import { checkSameOriginWrite, SESSION_COOKIE, userOf } from '../plugins/auth.js';
import { Type } from '@sinclair/typebox';

function keyOf(request: FastifyRequest): string {
  return request.principal.kind === 'user' ? request.principal.keyId : '';
}

function clearSessionCookie(reply: FastifyReply): void {
  void reply.clearCookie(SESSION_COOKIE, { path: '/', httpOnly: true, sameSite: 'strict' });
}

/**
 * What the web console needs beyond the agent API, usable by scripts too: sign-in sessions,
 * the caller's API keys, and usage over past months.
 */
export function consoleRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { sessions, users, usage } = ctx.services;
  const secureCookies = ctx.config.publicUrl.startsWith('https:');

  r.post(
    '/v2/session',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['console'],
        summary: 'Sign In',
        description:
          'Opens a web console session with an API key: the answer sets an httpOnly, SameSite=Strict cookie. Browsers must send the x-agentry-csrf header.',
        body: SignInRequest,
        response: { 200: SessionInfo, ...errorResponses(401, 403, 422) },
      },
    },
    async (request, reply) => {
      checkSameOriginWrite(request, ctx.config.publicUrl);
      const opened = await sessions.signIn(request.body.api_key);
      void reply.setCookie(SESSION_COOKIE, opened.token, {
        path: '/',
        httpOnly: true,
        sameSite: 'strict',
        secure: secureCookies || request.protocol === 'https',
        expires: new Date(opened.expiresAt),
      });
      return {
        user: { id: opened.user.id, name: opened.user.name },
        expires_at: isoTimestamp(opened.expiresAt),
      };
    },
  );

  r.get(
    '/v2/session',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['console'],
        summary: 'Who Am I',
        description: 'The signed-in user, and when the session ends.',
        response: { 200: SessionInfo, ...errorResponses(401) },
      },
    },
    async (request) => {
      const user = await users.findUser(userOf(request));
      const { principal } = request;
      const sessionEnds = principal.kind === 'user' ? principal.sessionExpiresAt : undefined;
      return {
        user: { id: user.id, name: user.name },
        expires_at: sessionEnds === undefined ? null : isoTimestamp(sessionEnds),
      };
    },
  );

  r.delete(
    '/v2/session',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['console'],
        summary: 'Sign Out',
        description: 'Ends the session of the cookie sent, if any, and clears the cookie.',
        response: { 200: Success, ...errorResponses(403) },
      },
    },
    async (request, reply) => {
      const token = request.cookies[SESSION_COOKIE];
      if (token) {
        checkSameOriginWrite(request, ctx.config.publicUrl);
        await sessions.signOut(token);
      }
      clearSessionCookie(reply);
      return { success: true };
    },
  );

  r.get(
    '/v2/api-keys',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['console'],
        summary: 'List API Keys',
        description: "The caller's API keys, oldest first; secrets are never shown again.",
        response: { 200: Type.Array(ApiKey), ...errorResponses(401) },
      },
    },
    async (request) =>
      (await users.listKeys(userOf(request))).map((k) => apiKeyView(k, keyOf(request))),
  );

  r.post(
    '/v2/api-keys',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['console'],
        summary: 'Create API Key',
        description:
          'A new key for the caller, shown once. Short-lived keys suit a single task, such as connecting one agent.',
        body: CreateApiKeyRequest,
        response: { 200: NewApiKey, ...errorResponses(401, 403, 422) },
      },
    },
    async (request) => {
      const { label, expires_in_seconds: lifetime } = request.body;
      const key = await users.createKey(userOf(request), {
        label: label ?? null,
        ...(lifetime == null ? {} : { lifetimeMs: lifetime * 1000 }),
      });
      const view = apiKeyView(key, '');
      return {
        id: view.id,
        label: view.label,
        created_at: view.created_at,
        expires_at: view.expires_at,
        key: key.token,
      };
    },
  );

  r.delete(
    '/v2/api-keys/:id',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['console'],
        summary: 'Revoke API Key',
        description: 'The key stops working at once, and so do sessions opened with it.',
        params: KeyParams,
        response: { 200: Success, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) => {
      await users.revokeKey(request.params.id, userOf(request));
      return { success: true };
    },
  );

  r.get(
    '/v2/agents/usage/history',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['usage'],
        summary: 'Get Usage History',
        description: "The caller's monthly counters, most recent month first.",
        querystring: UsageHistoryQuery,
        response: { 200: UsageHistory, ...errorResponses(401, 422) },
      },
    },
    async (request) => usage.history(userOf(request), request.query.months ?? 12),
  );
}
