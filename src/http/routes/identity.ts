import type { FastifyInstance } from 'fastify';
import { agentInPath, agentInBody } from '../../auth/principal.js';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { actorOf, userOf } from '../plugins/auth.js';
import { AddressParams, errorResponses } from '../../wire/common.js';
import { ChallengeResponse, IdentityProof, IdentityProven } from '../../wire/identity.js';

export function identityRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const identity = ctx.services.identity;

  r.get(
    '/v2/identity/:address/challenge',
    {
      config: { auth: 'user', about: agentInPath() },
      schema: {
        tags: ['identity'],
        summary: 'Get Identity Challenge',
        description:
          'A single-use challenge bound to the caller and the address, valid for minutes.',
        params: AddressParams,
        response: { 200: ChallengeResponse, ...errorResponses(401, 422) },
      },
    },
    async (request) => ({
      challenge: await identity.issueChallenge(userOf(request), request.params.address),
    }),
  );

  r.post(
    '/v2/identity',
    {
      config: { auth: 'user', about: agentInBody() },
      schema: {
        tags: ['identity'],
        summary: 'Create Or Prove Identity',
        description:
          'Proves control of an agent key by its signature of a challenge; the first proof creates the identity.',
        body: IdentityProof,
        response: { 200: IdentityProven, ...errorResponses(400, 401, 409, 422) },
      },
    },
    async (request) => ({
      address: await identity.prove(userOf(request), request.body, actorOf(request)),
    }),
  );
}
