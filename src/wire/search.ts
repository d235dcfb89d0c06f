import { Type, type Static } from '@sinclair/typebox';
import { AlmanacEndpoint } from './almanac.js';
import {
  AgentAddress,
  BoundedInteger,
  MAX_OFFSET,
  Nullable,
  StringEnum,
  WireString,
} from './common.js';

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

const SearchStatus = StringEnum(['active', 'inactive'], {
  description: 'as the Almanac answers it: whether the agent runs (docs/almanac.md, "Active")',
});
const SearchType = StringEnum(['hosted', 'local', 'mailbox', 'proxy', 'custom', 'a2a'], {
  description:
    'hosted here; else a2a for an A2A bridge (as its listing says); else how it is reached',
});

/** The statuses a search may filter by: Almanac activity, and whether forwards to it succeed. */
export const SEARCH_STATES = ['active', 'inactive', 'responsive', 'unresponsive'] as const;
/** How an agent is hosted, and how it was registered (uagent, a2a). */
export const SEARCH_AGENT_TYPES = [
  'uagent',
  'a2a',
  'hosted',
  'local',
  'mailbox',
  'proxy',
  'custom',
] as const;
/** The Search API's interaction thresholds, and the counts they stand for. */
export const INTERACTION_THRESHOLDS = {
  '10': 10,
  '100': 100,
  '1k': 1_000,
  '10k': 10_000,
  '100k': 100_000,
  '1m': 1_000_000,
  '10m': 10_000_000,
  '100m': 100_000_000,
} as const;
/**
 * The Search API's relevancy cutoffs, and the share of the best match's relevance a result
 * must reach under each.
 */
export const RELEVANCY_CUTOFFS = {
  none: 0,
  permissive: 0.25,
  balanced: 0.5,
  strict: 0.75,
} as const;
export const MAX_SEARCH_TAGS = 20;
export const MAX_TAG_LENGTH = 64;

const SearchFilters = Type.Object(
  {
    state: Type.Optional(
      Type.Array(StringEnum(SEARCH_STATES), {
        maxItems: 10,
        description:
          'any of: active/inactive (the Almanac registration), responsive/unresponsive (whether forwards to the agent fail, it stopped answering health probes, or its status is offline or unreachable)',
      }),
    ),
    category: Type.Optional(
      Type.Array(StringEnum(['fetch-ai', 'verified', 'community']), {
        maxItems: 10,
        description: 'every listing here is community',
      }),
    ),
    agent_type: Type.Optional(
      Type.Array(StringEnum(SEARCH_AGENT_TYPES), {
        maxItems: 10,
        description:
          'any of: how the agent is reached (hosted, local, mailbox, proxy, custom) or how it was registered (uagent, a2a)',
      }),
    ),
    protocol_digest: Type.Optional(
      Type.Array(
        Type.String({
          pattern: '^(proto:)?[0-9a-fA-F]{64}$',
          description: 'with or without proto:',
        }),
        {
          maxItems: 20,
          description:
            'any of these protocols, declared by the listing or the Almanac registration',
        },
      ),
    ),
    has_location: Type.Optional(
      Type.Boolean({
        default: false,
        description: 'only agents whose metadata.geolocation has a latitude and a longitude',
      }),
    ),
    has_readme: Type.Optional(
      Type.Boolean({ default: false, description: 'only agents with a non-empty readme' }),
    ),
    n_interactions: Type.Optional(
      Type.Union(
        [
          StringEnum(
            Object.keys(INTERACTION_THRESHOLDS) as (keyof typeof INTERACTION_THRESHOLDS)[],
          ),
          BoundedInteger({ maximum: MAX_OFFSET }),
          Type.Null(),
        ],
        { description: 'only agents with at least this many interactions in all' },
      ),
    ),
    tags: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: MAX_TAG_LENGTH }), {
        maxItems: MAX_SEARCH_TAGS,
        description: 'any of these tags (metadata.tags), compared in lower case',
      }),
    ),
  },
  { additionalProperties: false },
);

const searchFields = {
  filters: Type.Optional(SearchFilters),
  sort: Type.Optional(
    StringEnum(['relevancy', 'created-at', 'last-modified', 'interactions'], {
      default: 'relevancy',
    }),
  ),
  direction: Type.Optional(StringEnum(['asc', 'desc'], { default: 'asc' })),
  cutoff: Type.Optional(
    StringEnum(Object.keys(RELEVANCY_CUTOFFS) as (keyof typeof RELEVANCY_CUTOFFS)[], {
      default: 'none',
      description:
        'with search_text, drops the results scoring below a share of the best result’s full-text relevance: none keeps every match, permissive drops those below 25 % of the best score, balanced below 50 %, strict below 75 % (the best is that of the agents the text and filters match); without text, no effect',
    }),
  ),
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
  semantic_search: Type.Optional(
    Type.Boolean({
      default: false,
      description:
        'true is served by the full-text ranking (there is no semantic index here): the same results as false',
    }),
  ),
  rerank: Type.Optional(
    Type.Boolean({
      default: true,
      description: 'reorders semantic results only, so it changes nothing here',
    }),
  ),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000, default: 0 })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 30 })),
  exclude_geo_agents: Type.Optional(
    Type.Boolean({
      description:
        'leave out agents with a geolocation; left out: false (the generated clients send true)',
    }),
  ),
  source: Type.Optional(
    Type.String({ maxLength: 200, default: '', description: 'kept with the search' }),
  ),
  search_id: Type.Optional(
    WireString('uuid4', {
      description: 'a previous search whose pages this one continues; left out: a new id',
    }),
  ),
};

export const AgentSearchCriteria = Type.Object(searchFields, { additionalProperties: false });
export type AgentSearchCriteria = Static<typeof AgentSearchCriteria>;

/** No two places are farther apart than this; a larger radius means the same. */
const EARTH_CIRCUMFERENCE_METRES = 40_075_017;

const GeoFilter = Type.Object(
  {
    latitude: Type.Number({ minimum: -90, maximum: 90 }),
    longitude: Type.Number({ minimum: -180, maximum: 180 }),
    radius: Type.Number({
      exclusiveMinimum: 0,
      maximum: EARTH_CIRCUMFERENCE_METRES,
      description: 'metres',
    }),
  },
  { additionalProperties: false },
);

export const AgentGeoSearchCriteria = Type.Object(
  {
    ...searchFields,
    geo_filter: GeoFilter,
    include_geo_in_relevancy: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          'with search_text and sort relevancy: rank by distance (true) or by the text (false)',
      }),
    ),
  },
  { additionalProperties: false },
);
export type AgentGeoSearchCriteria = Static<typeof AgentGeoSearchCriteria>;

const GeoLocation = Type.Object({
  latitude: Type.Number(),
  longitude: Type.Number(),
  radius: Type.Number(),
});
export type GeoLocation = Static<typeof GeoLocation>;

/** Metadata values as the Search API types them: text, lists of text, or objects of text. */
const MetadataValue = Type.Union([
  Type.String(),
  Type.Array(Type.String()),
  Type.Record(Type.String(), Type.String()),
]);

export const SearchAgent = Type.Object({
  address: Type.String(),
  prefix: StringEnum(['agent', 'test-agent'], {
    description: "the network of the agent's Almanac registration; test-agent when it names none",
  }),
  name: Type.String(),
  description: Type.String(),
  readme: Type.String(),
  protocols: Type.Array(
    Type.Object({ name: Type.String(), version: Type.String(), digest: Type.String() }),
  ),
  avatar_href: Nullable(Type.String()),
  banner_href: Nullable(Type.String()),
  handle: Nullable(Type.String()),
  domain: Nullable(Type.String()),
  metadata: Nullable(
    Type.Record(Type.String(), MetadataValue, {
      description:
        'numbers and booleans as text; values nested deeper than an object of text as JSON text',
    }),
  ),
  total_interactions: Type.Integer(),
  recent_interactions: Type.Integer({ description: 'in the last 90 days' }),
  recent_verified_interactions: Type.Integer({
    description: 'always 0: no interaction here comes from a verifying source',
  }),
  recent_success_verified_interactions: Type.Integer({ description: 'always 0, as above' }),
  recent_success_rate: Nullable(
    Type.Number({
      description:
        "the share of the last 24 hours' health probes the agent answered (0 to 1), when its owner asked for probes; else null",
    }),
  ),
  recent_eval_success_rate: Nullable(Type.Number({ description: 'always null: not measured' })),
  rating: Nullable(Type.Number()),
  status: SearchStatus,
  unresponsive: Type.Boolean({
    description:
      'the last forward to the agent failed, it stopped answering health probes, or its status is offline or unreachable',
  }),
  type: SearchType,
  category: StringEnum(['fetch-ai', 'verified', 'community']),
  featured: Type.Boolean(),
  system_wide_tags: Type.Array(Type.String(), {
    description: 'metadata.tags of the listing and of the Almanac registration, in lower case',
  }),
  geo_location: Nullable(GeoLocation),
  owner: Nullable(Type.String({ description: 'always null: owners are not shown' })),
  last_updated: Type.String(),
  created_at: Type.String(),
});
export type SearchAgent = Static<typeof SearchAgent>;

export const SearchResults = Type.Object({
  agents: Type.Array(SearchAgent),
  offset: Type.Integer(),
  limit: Type.Integer(),
  num_hits: Type.Integer({ description: 'how many agents this answer holds' }),
  total: Type.Integer({ description: 'how many agents match, across all pages' }),
  search_id: Type.String({ format: 'uuid', description: 'give it to /click, or to the next page' }),
});
export type SearchResults = Static<typeof SearchResults>;

export const SearchAgentParams = Type.Object({ address: AgentAddress });
export const SearchAgentQuery = Type.Object({
  contract: Type.Optional(
    StringEnum(['mainnet', 'testnet'], {
      description:
        'the network: an agent whose registration names the other one answers 404; left out: any',
    }),
  ),
});

export const SearchFeedback = Type.Object(
  {
    address: AgentAddress,
    contract: Type.Optional(StringEnum(['mainnet', 'testnet'], { default: 'testnet' })),
    search_id: WireString('uuid4', { description: 'the search_id of the answer the agent was in' }),
    page_index: BoundedInteger({ maximum: MAX_OFFSET, description: 'from 0' }),
  },
  { additionalProperties: false },
);
export type SearchFeedback = Static<typeof SearchFeedback>;

export const SearchFeedbackRecorded = Type.Object({
  search_id: Type.String(),
  address: Type.String(),
  contract: Type.String(),
  page_index: Type.Integer(),
});

export const SearchTags = Type.Object({
  tags: Type.Array(Type.Object({ tag: Type.String() }), {
    description: 'the tags of listed agents, most used first',
  }),
});
