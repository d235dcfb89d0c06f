import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AttestationAuthenticator } from '../../auth/attestations.js';
import type { AuthRequirement, Principal } from '../../auth/principal.js';
import { UnauthenticatedError } from '../../errors.js';
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

function addressParam(request: FastifyRequest): string {
  return String((request.params as { address?: unknown }).address ?? '');
}

function bodySource(request: FastifyRequest): string {
  const body = request.body as { source?: unknown } | undefined;
  return typeof body?.source === 'string' ? body.source : '';
}

/**
 * One hook authenticates every request according to its route's `auth` option and leaves
 * the result on `request.principal`. Ownership (is this the caller's agent?) is a domain rule
 * and stays in the services.
 */
export function installAuth(
  app: FastifyInstance,
  deps: { users: UsersService; attestations: AttestationAuthenticator },
): void {
  // Fastify wants a null placeholder for object decorations; the hook sets the real value.
  app.decorateRequest<Principal | null>('principal', null);
  // Before validation, as FastAPI resolves security first (a caller without credentials learns
  // nothing about the body), but after parsing, so `agent-body-source` can read the body.
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
    if (requirement === 'user-or-agent') {
      request.principal = deps.attestations.authenticate(
        credential.attestation,
        addressParam(request),
      );
    } else if (requirement === 'agent-body-source') {
      request.principal = deps.attestations.authenticate(
        credential.attestation,
        bodySource(request),
      );
    } else {
      throw new UnauthenticatedError('This call needs a user API key: "Bearer <api key>"');
    }
  });
}

/** The user behind a request whose route requires `user`. */
export function userOf(request: FastifyRequest): string {
  const principal = request.principal;
  if (principal.kind !== 'user') throw new UnauthenticatedError();
  return principal.userId;
}
