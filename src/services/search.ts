import { randomUUID } from 'node:crypto';
import { NotFoundError, RequestValidationError } from '../errors.js';
import { inBatches } from '../infra/batches.js';
import type { Clock } from '../infra/clock.js';
import type { Store } from '../store/index.js';
import type { TextQuery } from '../store/full-text.js';
import type {
  AgentSearch,
  AgentSearchRow,
  AlmanacSearchRow,
  RegistrationType,
  SearchType,
} from '../store/repositories/search.js';
import type { AlmanacMetadata } from '../wire/almanac.js';
import type { Endpoint } from '../wire/common.js';
import { isoTimestamp } from '../wire/common.js';
import {
  INTERACTION_THRESHOLDS,
  RELEVANCY_CUTOFFS,
  type AgentGeoSearchCriteria,
  type AgentSearchCriteria,
  type AlmanacSearchRecord,
  type GeoLocation,
  type SearchAgent,
  type SearchFeedback,
  type SearchResults,
} from '../wire/search.js';
import { DOMAIN_NAME_PATTERN } from '../wire/domain-name.js';
import { HEALTH_RATE_WINDOW_MS } from '../wire/probes.js';
import { canonicalAgentAddress } from '../wire/formats.js';
import {
  normaliseDigest,
  REGISTRATION_LIFETIME_MS,
  type AlmanacService,
  type AlmanacEntry,
} from './almanac.js';
import type { DomainsService } from './domains.js';

const DIGEST = /^(proto:)?[0-9a-f]{64}$/i;
const RECENT_LIMIT = 100;
const RECENT_INTERACTIONS_MS = 90 * 24 * 3600 * 1000;
const MAX_WORDS = 10;
const HANDLE = /^[a-z0-9]+(-[a-z0-9]+)*$/;
const DOMAIN = new RegExp(DOMAIN_NAME_PATTERN);
const EARTH_RADIUS_M = 6_371_008.8;
/** How long a search is kept for clicks to refer to it. */
export const SEARCH_RETENTION_MS = 24 * 3600 * 1000;
/** Expired searches are deleted this many rows at a time, up to so many batches a run. */
const PURGE_BATCH = 5000;
const PURGE_MAX_BATCHES = 1000;
/** The most tags `GET /v1/search/agents/tags` lists. */
const MAX_LISTED_TAGS = 1000;
/** The Search API's networks, and the Almanac prefixes that stand for them. */
const CONTRACT_PREFIX = { mainnet: 'agent', testnet: 'test-agent' } as const;

/** The words of a search: letters and digits, lower case; what the full-text indexes see. */
function searchWords(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])
    .map((word) => word.slice(0, 64))
    .slice(0, MAX_WORDS);
}

/**
 * Search: which agents serve a protocol (uAgents' broadcast), the registry's search by text
 * with filters and orderings, search by distance, and resolution of any identifier (address,
 * handle or domain). Relevance and filters are the database's work; nothing scans in here.
 */
export class SearchService {
  constructor(
    private readonly store: Store,
    private readonly almanac: AlmanacService,
    private readonly domains: DomainsService,
    private readonly clock: Clock,
  ) {}

  /**
   * A protocol digest (with or without `proto:`) finds every Almanac registration declaring
   * it; other text the registrations of agents whose listing matches. An enrolled agent that
   * registered itself without registering in the Almanac is found by its listing, as the
   * Almanac resolves it. Active agents first.
   */
  async searchAlmanac(text: string, offset = 0, limit = 1000): Promise<AlmanacSearchRecord[]> {
    const searches = this.store.repos.search;
    const now = this.clock.now();
    const trimmed = text.trim();
    let rows: AlmanacSearchRow[];
    if (DIGEST.test(trimmed)) {
      rows = await searches.almanacByProtocol(
        normaliseDigest(trimmed.toLowerCase()),
        now,
        REGISTRATION_LIFETIME_MS,
        { offset, limit },
      );
    } else if (trimmed.toLowerCase().startsWith('proto:')) {
      throw RequestValidationError.single(
        ['body', 'text'],
        'a protocol digest is proto: followed by 64 hexadecimal digits',
        'string_pattern_mismatch',
      );
    } else {
      const words = searchWords(trimmed);
      if (words.length === 0) return [];
      rows = await searches.almanacByText({ words, exact: false }, now, REGISTRATION_LIFETIME_MS, {
        offset,
        limit,
      });
    }
    return rows.map((row) => this.almanacRecord(row));
  }

  /** The agents that registered most recently, and are still registered. */
  async recentAlmanac(): Promise<AlmanacSearchRecord[]> {
    const rows = await this.store.repos.search.almanacRecent(
      this.clock.now(),
      REGISTRATION_LIFETIME_MS,
      RECENT_LIMIT,
    );
    return rows.map((row) => this.almanacRecord(row));
  }

  /** The registry's search, in the Search API's terms; kept for clicks under its search id. */
  async searchAgents(criteria: AgentSearchCriteria): Promise<SearchResults> {
    const search = this.agentSearch(criteria);
    const found = search
      ? await this.store.repos.search.searchAgents(search)
      : { rows: [], total: 0 };
    return this.answer(criteria, found.rows, found.total);
  }

  /**
   * Listings whose metadata carries a geolocation whose area overlaps the circle asked for:
   * nearest first when sorted by relevancy (or, with search_text and not
   * include_geo_in_relevancy, by the text's relevance), else in the order asked. The database
   * finds the candidates; distances are computed here.
   */
  async searchGeo(criteria: AgentGeoSearchCriteria): Promise<SearchResults> {
    const search = this.agentSearch(criteria);
    if (!search) return this.answer(criteria, [], 0);
    const { rows } = await this.store.repos.search.searchAgents({ ...search, geo: true });
    const { latitude, longitude, radius } = criteria.geo_filter;
    const byDistance =
      search.sort === 'relevancy' && (!search.text || criteria.include_geo_in_relevancy === true);
    const near = rows
      .map((row) => ({ row, location: geoLocationOf(row) }))
      .filter(
        (entry): entry is { row: AgentSearchRow; location: GeoLocation } => entry.location !== null,
      )
      .map((entry) => ({
        ...entry,
        distance: distanceM(latitude, longitude, entry.location.latitude, entry.location.longitude),
      }))
      .filter((entry) => entry.distance <= radius + entry.location.radius);
    if (byDistance) {
      near.sort((a, b) => a.distance - b.distance || a.row.address.localeCompare(b.row.address));
    }
    const page = near.slice(search.offset, search.offset + search.limit);
    return this.answer(
      criteria,
      page.map((entry) => entry.row),
      near.length,
    );
  }

  /** A listed agent as search shows it; 404 when it has no listing, or is on another network. */
  async searchAgent(address: string, contract?: 'mainnet' | 'testnet'): Promise<SearchAgent> {
    const search = this.agentSearch({ search_text: `address:${address}` });
    const found = search ? await this.store.repos.search.searchAgents(search) : undefined;
    const row = found?.rows[0];
    if (!row || (contract && row.prefix !== null && row.prefix !== CONTRACT_PREFIX[contract])) {
      throw new NotFoundError(
        `${address} has no listing${contract ? ` on ${contract}` : ''}; register it with POST /v2/agents`,
      );
    }
    const [agent] = await this.searchRecords([row]);
    return agent!;
  }

  /**
   * Records that a client selected `address` among the answers of a search. The search must
   * be kept still (unknown or expired: 404) and must have answered that agent (else 422).
   */
  async recordClick(feedback: SearchFeedback): Promise<{
    search_id: string;
    address: string;
    contract: string;
    page_index: number;
  }> {
    const now = this.clock.now();
    const searchId = feedback.search_id.toLowerCase();
    const searches = this.store.repos.search;
    const kept = await searches.keptSearch(searchId, feedback.address, now);
    if (!kept) {
      throw new NotFoundError(
        `search ${searchId} is unknown or expired (searches are kept ${SEARCH_RETENTION_MS / 3600_000} hours); search again and send the search_id of its answer`,
      );
    }
    if (!kept.answered) {
      throw RequestValidationError.single(
        ['body', 'address'],
        `Value error, ${feedback.address} was not among the answers of search ${searchId}`,
      );
    }
    const click = {
      search_id: searchId,
      address: feedback.address,
      contract: feedback.contract ?? 'testnet',
      page_index: feedback.page_index,
    };
    await searches.recordClick({
      ...click,
      created_at: now,
      expires_at: kept.expiresAt,
    });
    return click;
  }

  /** The tags listed agents carry, most used first. */
  async tags(): Promise<{ tags: { tag: string }[] }> {
    const rows = await this.store.repos.search.tags(MAX_LISTED_TAGS);
    return { tags: rows.map((row) => ({ tag: row.tag })) };
  }

  /**
   * Forgets searches (and their clicks) kept longer than {@link SEARCH_RETENTION_MS}, a
   * batch at a time; how many rows went.
   */
  async purgeExpiredSearches(): Promise<number> {
    const now = this.clock.now();
    const { search } = this.store.repos;
    let removed = 0;
    for (const table of ['search_pages', 'search_clicks'] as const) {
      removed += await inBatches(PURGE_BATCH, PURGE_MAX_BATCHES, () =>
        search.purgeExpiredSearches(table, now, PURGE_BATCH),
      );
    }
    return removed;
  }

  /** The answer of a search, kept (what was asked, who was answered) under its search id. */
  private async answer(
    criteria: AgentSearchCriteria,
    rows: AgentSearchRow[],
    total: number,
  ): Promise<SearchResults> {
    const now = this.clock.now();
    const searchId = criteria.search_id?.toLowerCase() ?? randomUUID();
    const offset = criteria.offset ?? 0;
    const limit = criteria.limit ?? 30;
    const agents = await this.searchRecords(rows);
    await this.store.repos.search.recordSearchPage({
      search_id: searchId,
      request: JSON.stringify(criteria),
      addresses: agents.map((agent) => agent.address),
      page_offset: offset,
      total,
      created_at: now,
      expires_at: now + SEARCH_RETENTION_MS,
    });
    return { agents, offset, limit, num_hits: agents.length, total, search_id: searchId };
  }

  /**
   * An address, a handle or a domain, resolved to the agent's Almanac registration. 404 when
   * the identifier names nothing; a handle or domain whose agent is not in the Almanac answers
   * a registration that expired at the epoch, with no endpoints.
   */
  async resolve(id: string): Promise<AlmanacEntry> {
    const address = canonicalAgentAddress(id);
    if (address !== undefined) return this.almanac.resolve(address);
    let named: string | undefined;
    if (DOMAIN.test(id)) {
      named = await this.domains.pick(id);
    } else if (HANDLE.test(id)) {
      named = await this.store.repos.search.addressOfHandle(id);
    } else {
      throw RequestValidationError.single(
        ['path', 'id'],
        'not an agent address, a handle or a domain name',
      );
    }
    if (named === undefined) throw new NotFoundError(`${id} is not assigned`);
    try {
      return await this.almanac.resolve(named);
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      return {
        address: named,
        active: false,
        type: 'uagent',
        endpoints: [],
        protocols: [],
        metadata: null,
        expiresAt: 0,
        domainName: DOMAIN.test(id) ? id : null,
      };
    }
  }

  /**
   * The search asked, in the store's terms; undefined when it can match nothing. Semantic
   * search is served by the full-text ranking; a relevancy cutoff keeps the matches scoring
   * at least its share of the best one.
   */
  private agentSearch(criteria: AgentSearchCriteria): AgentSearch | undefined {
    const now = this.clock.now();
    const text = (criteria.search_text ?? '').trim();
    let address: string | undefined;
    let textQuery: TextQuery | undefined;
    const addressForm = /^address:\s*(\S+)$/i.exec(text);
    if (addressForm) {
      address = canonicalAgentAddress(addressForm[1]!);
      if (address === undefined) return undefined;
    } else if (text.length > 0) {
      const words = searchWords(text);
      if (words.length === 0) return undefined;
      textQuery = { words, exact: criteria.exact_match === true };
    }
    const filters = criteria.filters ?? {};
    // Every listing here is a community one: categories other than that match nothing.
    const categories = filters.category ?? [];
    if (categories.length > 0 && !categories.includes('community')) return undefined;
    const threshold = filters.n_interactions;
    const minInteractions =
      typeof threshold === 'string' ? INTERACTION_THRESHOLDS[threshold] : (threshold ?? undefined);
    let location: boolean | undefined;
    if (filters.has_location === true) location = true;
    if (criteria.exclude_geo_agents === true && !('geo_filter' in criteria)) {
      // Asking for agents with a location and leaving them out at once matches nothing.
      if (location === true) return undefined;
      location = false;
    }
    return {
      now,
      recentSince: now - RECENT_INTERACTIONS_MS,
      probesSince: now - HEALTH_RATE_WINDOW_MS,
      ...(textQuery && { text: textQuery }),
      ...(address !== undefined && { address }),
      states: filters.state ?? [],
      types: (filters.agent_type ?? []) as (SearchType | RegistrationType)[],
      protocols: [
        ...new Set((filters.protocol_digest ?? []).map((d) => normaliseDigest(d.toLowerCase()))),
      ],
      tags: [...new Set((filters.tags ?? []).map((tag) => tag.toLowerCase()))],
      ...(location !== undefined && { location }),
      hasReadme: filters.has_readme === true,
      ...(minInteractions !== undefined && { minInteractions }),
      cutoff: RELEVANCY_CUTOFFS[criteria.cutoff ?? 'none'],
      sort: criteria.sort ?? 'relevancy',
      direction: criteria.direction ?? 'asc',
      offset: criteria.offset ?? 0,
      limit: criteria.limit ?? 30,
    };
  }

  private async searchRecords(rows: AgentSearchRow[]): Promise<SearchAgent[]> {
    // The listing's protocols, then those only the Almanac registration declares.
    const perRow = rows.map((row) => [
      ...new Set(
        [
          ...(JSON.parse(row.protocols) as string[]),
          ...(row.almanac_protocols ? (JSON.parse(row.almanac_protocols) as string[]) : []),
        ].map(normaliseDigest),
      ),
    ]);
    const names = await this.store.repos.search.protocolNames([...new Set(perRow.flat())]);
    return rows.map((row, index) => {
      const profile = JSON.parse(row.profile) as {
        description?: string;
        readme?: string;
        avatar_url?: string;
        banner_url?: string;
      };
      const metadata = parseObject(row.metadata) ?? parseObject(row.almanac_metadata);
      return {
        address: row.address,
        prefix: row.prefix === 'agent' ? ('agent' as const) : ('test-agent' as const),
        name: row.name,
        description: profile.description ?? '',
        readme: profile.readme ?? '',
        protocols: perRow[index]!.map((digest) => ({
          name: names.get(digest)?.name ?? '',
          version: names.get(digest)?.version ?? '',
          digest,
        })),
        avatar_href: profile.avatar_url ? profile.avatar_url : null,
        banner_href: profile.banner_url ? profile.banner_url : null,
        handle: row.handle,
        domain: row.domain,
        metadata: metadata === null ? null : searchMetadata(metadata),
        total_interactions: row.total_interactions,
        recent_interactions: row.recent_interactions,
        // No interaction here comes from a source that checks its outcome (ASI:One, a QA
        // agent): agents report their own, so none counts as verified. The success rate is
        // that of the health probes its owner asked for (docs/activity.md, "Health").
        recent_verified_interactions: 0,
        recent_success_verified_interactions: 0,
        recent_success_rate: row.success_rate,
        recent_eval_success_rate: null,
        rating: null,
        status: row.status,
        unresponsive: row.unresponsive === 1,
        type: row.type,
        category: 'community' as const,
        featured: false,
        system_wide_tags: tagsOf(row),
        geo_location: geoLocationOf(row),
        owner: null,
        last_updated: isoTimestamp(row.updated_at),
        created_at: isoTimestamp(row.registered_at),
      };
    });
  }

  private almanacRecord(row: AlmanacSearchRow): AlmanacSearchRecord {
    const endpoints = JSON.parse(row.endpoints) as Endpoint[];
    return {
      address: row.address,
      status: row.active === 1 ? 'active' : 'inactive',
      type: this.almanac.typeOf(endpoints),
      protocols: JSON.parse(row.protocols) as string[],
      endpoints,
      metadata: parseObject(row.metadata) as AlmanacMetadata | null,
      expiry: isoTimestamp(row.expires_at),
      domain_name: row.domain,
      name: row.name,
    };
  }
}

function parseObject(text: string | null): Record<string, unknown> | null {
  if (text === null) return null;
  const value = JSON.parse(text) as unknown;
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;
}

/**
 * Metadata as the Search API types its values: text, lists of text, or objects of text.
 * Numbers and booleans become text; anything nested deeper becomes its JSON text; nulls go.
 */
function searchMetadata(
  metadata: Record<string, unknown>,
): Record<string, string | string[] | Record<string, string>> {
  const text = (value: unknown): string | undefined =>
    value === null || value === undefined
      ? undefined
      : typeof value === 'string'
        ? value
        : typeof value === 'object'
          ? JSON.stringify(value)
          : String(value as number | boolean);
  const out: Record<string, string | string[] | Record<string, string>> = {};
  for (const [key, value] of Object.entries(metadata)) {
    if (Array.isArray(value)) {
      out[key] = value.map(text).filter((item): item is string => item !== undefined);
    } else if (typeof value === 'object' && value !== null) {
      const inner: Record<string, string> = {};
      for (const [k, v] of Object.entries(value)) {
        const t = text(v);
        if (t !== undefined) inner[k] = t;
      }
      out[key] = inner;
    } else {
      const t = text(value);
      if (t !== undefined) out[key] = t;
    }
  }
  return out;
}

/** The text entries of metadata.tags of the listing and the registration, in lower case. */
function tagsOf(row: AgentSearchRow): string[] {
  const tags = new Set<string>();
  for (const text of [row.metadata, row.almanac_metadata]) {
    const list = parseObject(text)?.tags;
    if (!Array.isArray(list)) continue;
    for (const tag of list) if (typeof tag === 'string' && tag !== '') tags.add(tag.toLowerCase());
  }
  return [...tags];
}

/**
 * `metadata.geolocation` as uAgents writes it (`latitude`, `longitude` and optional `radius`
 * in metres, as numbers or strings), from the listing or else the Almanac registration.
 */
function geoLocationOf(row: AgentSearchRow): GeoLocation | null {
  for (const text of [row.metadata, row.almanac_metadata]) {
    const geo = parseObject(text)?.geolocation;
    if (typeof geo !== 'object' || geo === null) continue;
    const { latitude, longitude, radius } = geo as Record<string, unknown>;
    const lat = Number(latitude);
    const lon = Number(longitude);
    const r = radius === undefined ? 0 : Number(radius);
    if (
      Number.isFinite(lat) &&
      Number.isFinite(lon) &&
      Number.isFinite(r) &&
      Math.abs(lat) <= 90 &&
      Math.abs(lon) <= 180 &&
      r >= 0
    ) {
      return { latitude: lat, longitude: lon, radius: r };
    }
  }
  return null;
}

/** Great-circle distance in metres (haversine). */
function distanceM(lat1: number, lon1: number, lat2: number, lon2: number): number {
  const rad = Math.PI / 180;
  const dLat = (lat2 - lat1) * rad;
  const dLon = (lon2 - lon1) * rad;
  const a =
    Math.sin(dLat / 2) ** 2 + Math.cos(lat1 * rad) * Math.cos(lat2 * rad) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_M * Math.asin(Math.min(1, Math.sqrt(a)));
}
