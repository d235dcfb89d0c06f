import { Type, type Static } from '@sinclair/typebox';
import { AlmanacEndpoint } from './almanac.js';
import { BoundedInteger, MAX_OFFSET, Nullable, StringEnum } from './common.js';

// Almanac search (uAgents' ctx.broadcast), resolution and the Search API. Shapes follow
// the models uAgents and uagents-core validate the answers with.

export const AlmanacSearchRequest = Type.Object({
  text: Type.String({
    maxLength: 500,
    description:
      'a protocol digest (with or without proto:) finds the agents declaring it; other text matches names and descriptions',
  }),
  offset: Type.Optional(BoundedInteger({ maximum: MAX_OFFSET, default: 0 })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 1000 })),
});

export const AlmanacSearchRecord = Type.Object({
  address: Type.String(),
  status: StringEnum(['active', 'inactive']),
  type: StringEnum(['uagent', 'mailbox', 'proxy']),
  protocols: Type.Array(Type.String()),
  endpoints: Type.Array(AlmanacEndpoint),
  metadata: Nullable(Type.Object({}, { additionalProperties: true })),
  expiry: Type.String({ description: 'ISO-8601 with offset' }),
  domain_name: Nullable(Type.String()),
  name: Nullable(Type.String({ description: "the agent's registry name, when it has a listing" })),
});
export type AlmanacSearchRecord = Static<typeof AlmanacSearchRecord>;

export const AlmanacSearchResults = Type.Array(AlmanacSearchRecord);

export const ResolveIdParams = Type.Object({
  id: Type.String({ maxLength: 300, description: 'an agent address, a handle or a domain' }),
});

const SearchStatus = StringEnum(['active', 'inactive']);
const SearchType = StringEnum(['hosted', 'local', 'mailbox', 'proxy', 'custom']);

export const AgentSearchCriteria = Type.Object(
  {
    filters: Type.Optional(
      Type.Object(
        {
          state: Type.Optional(Type.Array(SearchStatus, { maxItems: 10 })),
          category: Type.Optional(
            Type.Array(StringEnum(['fetch-ai', 'verified', 'community']), { maxItems: 10 }),
          ),
          agent_type: Type.Optional(Type.Array(SearchType, { maxItems: 10 })),
        },
        { additionalProperties: true },
      ),
    ),
    sort: Type.Optional(
      StringEnum(['relevancy', 'created-at', 'last-modified', 'interactions'], {
        default: 'relevancy',
      }),
    ),
    direction: Type.Optional(StringEnum(['asc', 'desc'], { default: 'asc' })),
    search_text: Type.Optional(
      Nullable(
        Type.String({
          maxLength: 500,
          description: 'words to rank by; `address:<agent1…>` finds one agent',
        }),
      ),
    ),
    exact_match: Type.Optional(
      Type.Boolean({ description: 'every word must appear whole', default: false }),
    ),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000, default: 0 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 30 })),
  },
  { additionalProperties: true },
);
export type AgentSearchCriteria = Static<typeof AgentSearchCriteria>;

/** No two places are farther apart than this; a larger radius means the same. */
const EARTH_CIRCUMFERENCE_METRES = 40_075_017;

const GeoFilter = Type.Object({
  latitude: Type.Number({ minimum: -90, maximum: 90 }),
  longitude: Type.Number({ minimum: -180, maximum: 180 }),
  radius: Type.Number({
    exclusiveMinimum: 0,
    maximum: EARTH_CIRCUMFERENCE_METRES,
    description: 'metres',
  }),
});

export const AgentGeoSearchCriteria = Type.Composite([
  AgentSearchCriteria,
  Type.Object({ geo_filter: GeoFilter }),
]);
export type AgentGeoSearchCriteria = Static<typeof AgentGeoSearchCriteria>;

const GeoLocation = Type.Object({
  latitude: Type.Number(),
  longitude: Type.Number(),
  radius: Type.Number(),
});
export type GeoLocation = Static<typeof GeoLocation>;

export const SearchAgent = Type.Object({
  address: Type.String(),
  name: Type.String(),
  description: Type.String(),
  readme: Type.String(),
  protocols: Type.Array(
    Type.Object({ name: Type.String(), version: Type.String(), digest: Type.String() }),
  ),
  avatar_href: Nullable(Type.String()),
  handle: Nullable(Type.String()),
  domain: Nullable(Type.String()),
  metadata: Nullable(Type.Object({}, { additionalProperties: true })),
  total_interactions: Type.Integer(),
  recent_interactions: Type.Integer({ description: 'in the last 90 days' }),
  rating: Nullable(Type.Number()),
  status: SearchStatus,
  type: SearchType,
  category: StringEnum(['fetch-ai', 'verified', 'community']),
  featured: Type.Boolean(),
  geo_location: Nullable(GeoLocation),
  last_updated: Type.String(),
  created_at: Type.String(),
});
export type SearchAgent = Static<typeof SearchAgent>;

export const SearchResults = Type.Object({ agents: Type.Array(SearchAgent) });
