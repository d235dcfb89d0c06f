import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { UserPrincipal } from '../../auth/principal.js';
import type { AppContext } from '../../context.js';
import { AddressParams, errorResponses } from '../../wire/common.js';
import {
  FederatedSearchQuery,
  FederatedSearchResults,
  FederationIdentity,
  FederationStatus,
  PeerRecord,
  PeerSearchRequest,
  PublishingRequest,
  PublishingSetting,
} from '../../wire/federation.js';

/**
 * Federation (docs/federation.md): this instance's identity and view of its peers and
 * upstreams; the owner's publishing setting; the look-ups and searches peers make, signed with
 * their instance key (an agent attestation: any other caller is refused).
 */
export function federationRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { federation } = ctx.services;

  r.get(
    '/v2/federation',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['federation'],
        summary: 'Get Federation Identity',
        description:
          "This instance's address (name it in a peer's AGENTRY_PEERS), its public URL and how many agents it publishes.",
        response: { 200: FederationIdentity },
      },
    },
    () => federation.identityView(),
  );

  r.get(
    '/v2/federation/health',
    {
      config: { auth: 'user-or-any-agent' },
      schema: {
        tags: ['federation'],
        summary: 'Get Federation Health',
        description:
          "This instance's identity, the health of its peers and upstreams as this process last found them, and the last look-ups it answered from afar: for a user's key, or the instance's own attestation (agentry status); any other agent: 404.",
        response: { 200: FederationStatus, ...errorResponses(401, 403, 404) },
      },
    },
    (request) => federation.statusFor(request.principal),
  );

  r.get(
    '/v2/agents/:address/federation',
    {
      config: { auth: 'user', about: { agent: 'params', field: 'address' } },
      schema: {
        tags: ['federation'],
        summary: 'Get Publishing Setting',
        description:
          'Whether the caller’s agent is published to the peers and upstreams, and where.',
        params: AddressParams,
        response: { 200: PublishingSetting, ...errorResponses(401, 403, 404, 422) },
      },
    },
    (request) => federation.setting(request.principal as UserPrincipal, request.params.address),
  );

  r.put(
    '/v2/agents/:address/federation',
    {
      config: { auth: 'user', about: { agent: 'params', field: 'address' } },
      schema: {
        tags: ['federation'],
        summary: 'Set Publishing Setting',
        description:
          'Publishes the caller’s agent: peers may resolve it, and its Almanac registration is relayed unchanged to the plain upstreams, now and each time the agent renews it. Unpublished, peers are refused it at once (they keep what they cached until it expires); a plain upstream keeps what it was sent until it expires.',
        params: AddressParams,
        body: PublishingRequest,
        response: { 200: PublishingSetting, ...errorResponses(401, 403, 404, 422) },
      },
    },
    (request) =>
      federation.setPublished(
        request.principal as UserPrincipal,
        request.params.address,
        request.body.published,
      ),
  );

  r.get(
    '/v2/federation/agents/:address',
    {
      config: { auth: 'agent' },
      schema: {
        tags: ['federation'],
        summary: 'Resolve Published Agent (for peers)',
        description:
          "For a peer, signed with its instance key: a published agent's Almanac registration as the agent signed it. 404 for an agent not published or not registered, and for any caller that is not a peer.",
        params: AddressParams,
        response: { 200: PeerRecord, ...errorResponses(401, 404, 422) },
      },
    },
    (request) => {
      const caller = request.principal.kind === 'agent' ? request.principal.address : '';
      return federation.servePeer(caller, request.params.address);
    },
  );

  r.post(
    '/v2/federation/search',
    {
      config: { auth: 'agent' },
      schema: {
        tags: ['federation'],
        summary: 'Search Published Agents (for peers)',
        description:
          "For a peer, signed with its instance key: the listings of this instance's published agents that match, each marked with its home. 404 for any caller that is not a peer.",
        body: PeerSearchRequest,
        response: { 200: FederatedSearchResults, ...errorResponses(401, 404, 422) },
      },
    },
    async (request) => {
      const caller = request.principal.kind === 'agent' ? request.principal.address : '';
      const { search_text, limit } = request.body;
      return { agents: await federation.searchForPeer(caller, search_text, limit ?? 30) };
    },
  );

  r.get(
    '/v2/federation/search',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['federation'],
        summary: 'Search Peers',
        description:
          "The peers' published listings that match `q`, each marked with its home; a peer that fails or is slow adds nothing.",
        querystring: FederatedSearchQuery,
        response: { 200: FederatedSearchResults, ...errorResponses(401, 403, 422) },
      },
    },
    async (request) => ({
      agents: await federation.searchPeers(request.query.q, request.query.limit ?? 30),
    }),
  );
}
