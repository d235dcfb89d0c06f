import type {
  FastifyContextConfig,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  RouteOptions,
} from 'fastify';
import type { AttestationAuthenticator } from '../../auth/attestations.js';
import {
  scopeRefusal,
  type AuthRequirement,
  type CallSubject,
  type KeyScope,
  type Principal,
} from '../../auth/principal.js';
import { ForbiddenError, UnauthenticatedError } from '../../errors.js';
import type { KeysService } from '../../services/keys.js';
import type { MailroomService } from '../../services/mailroom.js';
import type { SessionsService } from '../../services/sessions.js';

/** The header that makes a user's request act in the name of one of their teams. */
export const TEAM_HEADER = 'x-team';

/** The cookie that carries a web console session. */
export const SESSION_COOKIE = 'agentry_session';
/** The header a cookie-authenticated write must carry; other sites cannot set it. */
const CSRF_HEADER = 'x-agentry-csrf';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * A write made with a session cookie, and a sign-in (which sets one), must come from this
 * service's own pages: it carries the custom header (which a form or a cross-site script
 * cannot send without a CORS grant that is never given with credentials), and any Origin or
 * Sec-Fetch-Site the browser sends must say same origin. Sign-in asks for it even without a
 * cookie: otherwise another site could sign a visitor's browser into an account of its own.
 */
export function checkSameOriginWrite(request: FastifyRequest, publicUrl?: string): void {
  if (SAFE_METHODS.has(request.method)) return;
  if (request.headers[CSRF_HEADER] === undefined) {
    throw new ForbiddenError(
      `Sign-in and cookie-authenticated writes need the ${CSRF_HEADER} header (any value)`,
    );
  }
  const site = request.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') {
    throw new ForbiddenError('Cross-site request refused');
  }
  const origin = request.headers.origin;
  if (origin === undefined) return;
  // Behind a proxy that ends TLS, the browser's origin is the public URL's, not the socket's.
  const own = [`${request.protocol}://${request.host}`];
  if (publicUrl) own.push(new URL(publicUrl).origin);
  if (!own.includes(origin)) throw new ForbiddenError('Cross-origin request refused');
}

/** The cookie the console's live streams take their team from. */
const TEAM_COOKIE = 'agentry_team';

/**
 * The team of a console's live stream: a browser's EventSource sends no headers of its own, so
 * a stream opened with the session cookie reads the team from the console's team cookie. Only
 * streams do: any other call names its team with `x-team`.
 */
function streamTeam(request: FastifyRequest): string | undefined {
  const header = request.headers.cookie;
  if (request.method !== 'GET' || !header) return undefined;
  if (!(request.headers.accept ?? '').includes('text/event-stream')) return undefined;
  return request.server.parseCookie(header)[TEAM_COOKIE] || undefined;
}

/**
 * The session cookie a request carries, if any. Cookies are read only where they are used:
 * parsing them for every request would give each one (every held mailbox poll among them) a
 * cookie object it keeps.
 */
export function sessionCookie(request: FastifyRequest): string | undefined {
  const header = request.headers.cookie;
  return header ? request.server.parseCookie(header)[SESSION_COOKIE] : undefined;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may call the route; every route must say. */
    auth?: AuthRequirement;
    /** What the call is about, for scoped keys and attestations; absent: no one agent. */
    about?: CallSubject;
  }
  interface FastifyRequest {
    principal: Principal;
  }
}

const anonymous: Principal = { kind: 'anonymous' };

type Credential =
  | { scheme: 'bearer'; token: string }
  | { scheme: 'agent'; attestation: string }
  | { scheme: 'token'; token: string }
  | undefined;

function readCredential(request: FastifyRequest): Credential {
  const header = request.headers.authorization;
  if (!header) return undefined;
  const space = header.indexOf(' ');
  const scheme = (space < 0 ? header : header.slice(0, space)).toLowerCase();
  const value = space < 0 ? '' : header.slice(space + 1).trim();
  if (scheme === 'bearer' && value) return { scheme: 'bearer', token: value };
  if (scheme === 'agent' && value) return { scheme: 'agent', attestation: value };
  if (scheme === 'token' && value) return { scheme: 'token', token: value };
  throw new UnauthenticatedError('Unsupported Authorization header; use "Bearer <api key>"');
}

/**
 * The agent a call is about, as its route declares it: one field of the path or body, read
 * once validation has made it canonical. Whatever else a body carries is never looked at.
 */
function subjectAgent(request: FastifyRequest): unknown {
  const about = request.routeOptions.config.about;
  if (about === undefined || typeof about === 'string') return undefined;
  const part = (about.agent === 'params' ? request.params : request.body) as
    Record<string, unknown> | null | undefined;
  return part !== null && typeof part === 'object' ? part[about.field] : undefined;
}

/** The agent an attestation acts on: the route's subject, or the body's `source`. */
function actedOn(request: FastifyRequest, requirement: AuthRequirement): unknown {
  if (requirement === 'agent-body-source') {
    return (request.body as { source?: unknown } | undefined)?.source;
  }
  return subjectAgent(request);
}

/**
 * What a scoped key may do, checked before validation where the request itself does not
 * matter: a read-only key reads alone; a key limited to agents makes no call about the
 * caller's things as a whole (docs/keys.md). A route of calls of its own checks each.
 */
function checkScopeOfRoute(request: FastifyRequest, scope: KeyScope): void {
  const { about } = request.routeOptions.config;
  if (about === 'each-call') return;
  const writes = request.method !== 'GET' && request.method !== 'HEAD';
  // Which agent is known after validation: here, only whether the route names one.
  const refusal = scopeRefusal(scope, {
    writes,
    about: about === undefined || scope.addresses === null ? undefined : scope.addresses[0],
  });
  if (refusal !== undefined) throw new ForbiddenError(refusal);
}

/**
 * What a key limited to agents may do on a call about one agent, checked once validation
 * has made the request's address canonical: the agent must be one of the key's.
 */
function checkScopeOfRequest(request: FastifyRequest, scope: KeyScope): void {
  const { about } = request.routeOptions.config;
  if (scope.addresses === null || about === 'narrower-key' || about === 'each-call') return;
  const agent = subjectAgent(request);
  const refusal = scopeRefusal(
    { readOnly: false, addresses: scope.addresses },
    { writes: false, about: typeof agent === 'string' ? agent : '' },
  );
  if (refusal !== undefined) throw new ForbiddenError(refusal);
}

/**
 * A route's declaration is checked when it is added: a route an agent may call about itself,
 * or a key limited to agents about one of them, names the field that says which agent, and
 * its schema has that field.
 */
function checkDeclaration(route: RouteOptions): void {
  const config = (route.config ?? {}) as FastifyContextConfig;
  const { about, auth } = config;
  const name = `${String(route.method)} ${route.url}`;
  if (auth === 'user-or-agent' && (about === undefined || typeof about === 'string')) {
    throw new Error(`${name}: a user-or-agent route declares the agent it is about (config.about)`);
  }
  if (about === undefined || typeof about === 'string') return;
  const schema = route.schema as { params?: unknown; body?: unknown } | undefined;
  const part = (about.agent === 'params' ? schema?.params : schema?.body) as
    { properties?: Record<string, unknown> } | undefined;
  if (part?.properties?.[about.field] === undefined) {
    throw new Error(
      `${name}: config.about names ${about.agent}.${about.field}, which its schema lacks`,
    );
  }
}

/** Counts a request whose credential was refused; throws when that is one too many. */
export type RefusalHook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/**
 * The rate-limit bucket of a request: its user or agent once authenticated, else its client
 * address. A key spelled differently, or any number of junk credentials, is still one bucket.
 */
export function rateLimitKey(request: FastifyRequest): string {
  const principal = request.principal as Principal | null;
  switch (principal?.kind) {
    case 'user':
      return `user:${principal.userId}`;
    case 'agent':
      return `agent:${principal.address}`;
    default:
      return `ip:${request.ip}`;
  }
}

/**
 * One hook authenticates every request according to its route's `auth` option and leaves
 * the result on `request.principal`; a second one, once validation has made the request's
 * addresses canonical, checks that an agent acts on itself. Ownership (is this the caller's
 * agent?) is a domain rule and stays in the services.
 */
export function installAuth(
  app: FastifyInstance,
  deps: {
    keys: KeysService;
    attestations: AttestationAuthenticator;
    /** Rate limiting of refused credentials, when limits are on. */
    countRefusal?: RefusalHook;
    sessions: SessionsService;
    /** The service's public URL: writes from its origin are same-origin too. */
    publicUrl?: string;
    /** Hears of each agent that called with a valid attestation (it is running). */
    agentCalled?: (address: string) => void;
    /** Checks the access tokens of the v1 mailroom. */
    mailroom: Pick<MailroomService, 'authenticate'>;
    /** The owner id of the team a user may act for (`x-team`), or a refusal. */
    teams?: { actAs(userId: string, slug: string): Promise<string> };
  },
): void {
  // With `x-team`, a user's request acts for the team: the team is the owner every service
  // sees, checked on each request so that a member removed loses access at once. An agent's
  // attestation acts for the agent alone and ignores the header.
  const actForTeam = async (request: FastifyRequest, viaSession = false): Promise<void> => {
    const principal = request.principal;
    const slug = request.headers[TEAM_HEADER] ?? (viaSession ? streamTeam(request) : undefined);
    if (principal.kind !== 'user' || slug === undefined || slug === '') return;
    if (typeof slug !== 'string' || !deps.teams) {
      throw new ForbiddenError(`Send one ${TEAM_HEADER} header, naming one team`);
    }
    const teamId = await deps.teams.actAs(principal.userId, slug);
    request.principal = {
      ...principal,
      userId: teamId,
      team: { slug, actingUserId: principal.userId },
    };
  };
  app.addHook('onRoute', checkDeclaration);
  // Fastify wants a null placeholder for object decorations; the hook sets the real value.
  app.decorateRequest<Principal | null>('principal', null);
  // Before validation, as FastAPI resolves security first (a caller without credentials learns
  // nothing about the body).
  const authenticate = async (request: FastifyRequest): Promise<void> => {
    const requirement = request.routeOptions.config.auth ?? 'none';
    request.principal = anonymous;
    if (requirement === 'none') return;
    const credential = readCredential(request);
    if (requirement === 'agent-token') {
      if (credential?.scheme !== 'token') {
        throw new UnauthenticatedError(
          'This call needs a v1 access token: "Authorization: token <access token>" from POST /v1/auth/prove',
          'token',
        );
      }
      request.principal = await deps.mailroom.authenticate(credential.token);
      deps.agentCalled?.(request.principal.address);
      return;
    }
    if (credential?.scheme === 'token') {
      throw new UnauthenticatedError(
        'A v1 access token is only accepted by the v1 mailbox; use "Bearer <api key>"',
      );
    }
    const session = sessionCookie(request);
    const agentOnly = requirement === 'agent-body-source' || requirement === 'agent';
    if (!credential && session && !agentOnly) {
      checkSameOriginWrite(request, deps.publicUrl);
      try {
        request.principal = await deps.sessions.authenticate(session);
      } catch (err) {
        // A stale cookie must not stop what anyone may do.
        if (requirement !== 'optional-user') throw err;
        return;
      }
      await actForTeam(request, true);
      return;
    }
    if (!credential) {
      if (requirement === 'optional-user') return;
      throw new UnauthenticatedError(
        'Not authenticated',
        requirement === 'user' ? 'Bearer' : agentOnly ? 'Agent' : 'Bearer, Agent',
      );
    }
    if (credential.scheme === 'bearer') {
      if (agentOnly) {
        throw new UnauthenticatedError('This call needs an agent attestation', 'Agent');
      }
      request.principal = await deps.keys.authenticate(credential.token);
      await actForTeam(request);
      return;
    }
    if (requirement !== 'user-or-agent' && requirement !== 'user-or-any-agent' && !agentOnly) {
      throw new UnauthenticatedError('This call needs a user API key: "Bearer <api key>"');
    }
    request.principal = deps.attestations.authenticate(credential.attestation);
    deps.agentCalled?.(request.principal.address);
  };
  app.addHook('preValidation', async (request, reply) => {
    try {
      await authenticate(request);
    } catch (err) {
      // The client is still anonymous: counted by address, it may get a 429 instead.
      request.principal = anonymous;
      if (deps.countRefusal) await deps.countRefusal(request, reply);
      throw err;
    }
  });
  // Not a refused credential (not counted as one): a valid key asked for more than it may.
  app.addHook('preValidation', async (request) => {
    const { principal } = request;
    if (principal.kind === 'user' && principal.scope) checkScopeOfRoute(request, principal.scope);
  });
  app.addHook('preHandler', async (request) => {
    const { principal } = request;
    if (principal.kind === 'user' && principal.scope) checkScopeOfRequest(request, principal.scope);
    const requirement = request.routeOptions.config.auth;
    // An attestation on an `agent` route, or a v1 token, is about the agent it stands for; an
    // agent acting on the assets it may reach names no agent.
    if (
      principal.kind !== 'agent' ||
      requirement === 'agent' ||
      requirement === 'agent-token' ||
      requirement === 'user-or-any-agent'
    ) {
      return;
    }
    if (principal.address !== actedOn(request, requirement ?? 'none')) {
      throw new ForbiddenError('Agent attestation does not belong to the requested agent');
    }
  });
}

/**
 * The user who makes the request, even when it acts for a team: team administration is about
 * the person, not the owner they act for.
 */
export function actorOf(request: FastifyRequest): string {
  const principal = request.principal;
  if (principal.kind !== 'user') throw new UnauthenticatedError();
  return principal.team?.actingUserId ?? principal.userId;
}

/** The owner behind a request whose route requires `user` (with `x-team`, the team). */
export function userOf(request: FastifyRequest): string {
  const principal = request.principal;
  if (principal.kind !== 'user') throw new UnauthenticatedError();
  return principal.userId;
}
