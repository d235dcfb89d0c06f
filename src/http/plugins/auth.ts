import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AttestationAuthenticator } from '../../auth/attestations.js';
import type { AuthRequirement, Principal } from '../../auth/principal.js';
import { ForbiddenError, UnauthenticatedError } from '../../errors.js';
import type { UsersService } from '../../services/users.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may call the route; every route must say. */
    auth?: AuthRequirement;
  }
  interface FastifyRequest {
    principal: Principal;
  }
}

const anonymous: Principal = { kind: 'anonymous' };

type Credential =
  { scheme: 'bearer'; token: string } | { scheme: 'agent'; attestation: string } | undefined;

function readCredential(request: FastifyRequest): Credential {
  const header = request.headers.authorization;
  if (!header) return undefined;
  const space = header.indexOf(' ');
  const scheme = (space < 0 ? header : header.slice(0, space)).toLowerCase();
  const value = space < 0 ? '' : header.slice(space + 1).trim();
  if (scheme === 'bearer' && value) return { scheme: 'bearer', token: value };
  if (scheme === 'agent' && value) return { scheme: 'agent', attestation: value };
  throw new UnauthenticatedError('Unsupported Authorization header; use "Bearer <api key>"');
}

/**
 * The agent a request acts on, for routes an agent may call: the path's address or the body's
 * `source`, read after validation, which made them canonical.
 */
function actedOn(request: FastifyRequest, requirement: AuthRequirement): unknown {
  if (requirement === 'user-or-agent') return (request.params as { address?: unknown }).address;
  return (request.body as { source?: unknown } | undefined)?.source;
}

/**
 * One hook authenticates every request according to its route's `auth` option and leaves
 * the result on `request.principal`; a second one, once validation has made the request's
 * addresses canonical, checks that an agent acts on itself. Ownership (is this the caller's
 * agent?) is a domain rule and stays in the services.
 */
export function installAuth(
  app: FastifyInstance,
  deps: { users: UsersService; attestations: AttestationAuthenticator },
): void {
  // Fastify wants a null placeholder for object decorations; the hook sets the real value.
  app.decorateRequest<Principal | null>('principal', null);
  // Before validation, as FastAPI resolves security first (a caller without credentials learns
  // nothing about the body).
  app.addHook('preValidation', async (request) => {
    const requirement = request.routeOptions.config.auth ?? 'none';
    request.principal = anonymous;
    if (requirement === 'none') return;
    const credential = readCredential(request);
    if (!credential) {
      if (requirement === 'optional-user') return;
      throw new UnauthenticatedError(
        'Not authenticated',
        requirement === 'user' ? 'Bearer' : 'Bearer, Agent',
      );
    }
    if (credential.scheme === 'bearer') {
      if (requirement === 'agent-body-source') {
        throw new UnauthenticatedError('This call needs an agent attestation', 'Agent');
      }
      request.principal = await deps.users.authenticate(credential.token);
      return;
    }
    if (requirement !== 'user-or-agent' && requirement !== 'agent-body-source') {
      throw new UnauthenticatedError('This call needs a user API key: "Bearer <api key>"');
    }
    request.principal = deps.attestations.authenticate(credential.attestation);
  });
  app.addHook('preHandler', async (request) => {
    const { principal } = request;
    if (principal.kind !== 'agent') return;
    if (principal.address !== actedOn(request, request.routeOptions.config.auth ?? 'none')) {
      throw new ForbiddenError('Agent attestation does not belong to the requested agent');
    }
  });
}

/** The user behind a request whose route requires `user`. */
export function userOf(request: FastifyRequest): string {
  const principal = request.principal;
  if (principal.kind !== 'user') throw new UnauthenticatedError();
  return principal.userId;
}
