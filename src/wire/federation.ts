import { Type, type Static } from '@sinclair/typebox';
import { AgentRegistrationAttestation } from './almanac.js';
import { Nullable } from './common.js';

// Federation (docs/federation.md): this instance's identity and its view of the services it
// resolves through; the owner's publishing setting; what peers ask each other.

const Health = {
  healthy: Type.Boolean({
    description:
      'false while its last exchange failed (down, slower than the timeout, garbage, a record that does not check out); true otherwise, also before it was first asked',
  }),
  last_ok_at: Nullable(Type.String({ description: 'ISO-8601: its last good exchange' })),
  last_error: Nullable(Type.String({ description: 'what went wrong last, in words' })),
};

/** What anyone may know of this instance: who it is and where. */
export const FederationIdentity = Type.Object({
  address: Type.String({ description: "this instance's address: it signs requests to peers" }),
  url: Type.String({ description: "this instance's public URL (its peers' `home` for it)" }),
  published_agents: Type.Integer({ description: 'agents published from this instance' }),
});
export type FederationIdentity = Static<typeof FederationIdentity>;

export const FederationStatus = Type.Object({
  address: Type.String({ description: "this instance's address: it signs requests to peers" }),
  url: Type.String({ description: "this instance's public URL (its peers' `home` for it)" }),
  peers: Type.Array(Type.Object({ url: Type.String(), address: Type.String(), ...Health })),
  upstreams: Type.Array(Type.Object({ url: Type.String(), ...Health })),
  published_agents: Type.Integer({ description: 'agents published from this instance' }),
  remote_lookups: Type.Array(
    Type.Object({
      address: Type.String(),
      home: Type.String({ description: 'the peer or upstream that answered' }),
      at: Type.String(),
      cached: Type.Boolean({ description: 'answered from this process’s cache' }),
    }),
    { description: 'the last 100 look-ups answered from afar by this process, newest first' },
  ),
});
export type FederationStatus = Static<typeof FederationStatus>;

export const PublishingRequest = Type.Object({
  published: Type.Boolean({ description: 'true: published to the peers and upstreams' }),
});

export const PublishingSetting = Type.Object({
  address: Type.String(),
  published: Type.Boolean(),
  published_at: Nullable(Type.String({ description: 'ISO-8601; null when not published' })),
  upstreams: Type.Array(Type.String(), {
    description:
      'where it is published: the peers (which ask) and the plain upstreams (pushed its registration); empty when not published',
  }),
});
export type PublishingSetting = Static<typeof PublishingSetting>;

/** What a peer answers for one of its published agents. */
export const PeerRecord = Type.Object({
  attestation: AgentRegistrationAttestation,
  expires_at: Type.String({ description: 'ISO-8601: the registration resolves until then' }),
  home: Type.String({ description: 'the public URL of the instance the agent is published on' }),
});
export type PeerRecord = Static<typeof PeerRecord>;

export const PeerSearchRequest = Type.Object({
  search_text: Type.String({ maxLength: 500 }),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 30 })),
});
export type PeerSearchRequest = Static<typeof PeerSearchRequest>;

export const FederatedListing = Type.Object({
  address: Type.String(),
  name: Type.String(),
  description: Type.String(),
  handle: Nullable(Type.String()),
  home: Type.String({ description: 'the public URL of the instance it is published on' }),
});
export type FederatedListing = Static<typeof FederatedListing>;

export const FederatedSearchResults = Type.Object({ agents: Type.Array(FederatedListing) });
export type FederatedSearchResults = Static<typeof FederatedSearchResults>;

export const FederatedSearchQuery = Type.Object({
  q: Type.String({ maxLength: 500, description: 'the text searched for' }),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 30 })),
});
