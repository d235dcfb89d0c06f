import type { FastifyInstance, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { errorResponses, Success } from '../../wire/common.js';
import { SessionInfo, SignInRequest } from '../../wire/sessions.js';
import { actorOf, checkSameOriginWrite, SESSION_COOKIE, sessionCookie } from '../plugins/auth.js';
import { sessionInfo } from '../../views/sessions.js';

function clearSessionCookie(reply: FastifyReply): void {
  void reply.clearCookie(SESSION_COOKIE, { path: '/', httpOnly: true, sameSite: 'strict' });
}

/**
 * Web console sessions, usable by scripts too: an API key signs in once, and the browser
 * holds a session cookie instead.
 */
export function sessionsRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { sessions, users } = ctx.services;
  const secureCookies = ctx.config.publicUrl.startsWith('https:');

  r.post(
    '/v2/session',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['console'],
        summary: 'Sign In',
        description:
          'Opens a web console session with an API key: the answer sets an httpOnly, SameSite=Strict cookie. Every caller, script or browser, sends the x-agentry-csrf header (any value), as for every write made with the cookie.',
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
      return sessionInfo(opened.user, opened.expiresAt);
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
      // The person signed in, even when the call names a team.
      const user = await users.findUser(actorOf(request));
      const { principal } = request;
      return sessionInfo(user, principal.kind === 'user' ? principal.sessionExpiresAt : undefined);
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
      const token = sessionCookie(request);
      if (token) {
        checkSameOriginWrite(request, ctx.config.publicUrl);
        await sessions.signOut(token);
      }
      clearSessionCookie(reply);
      return { success: true };
    },
  );
}
