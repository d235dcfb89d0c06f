import { NotFoundError, RequestValidationError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import type { Store } from '../store/index.js';
import type { TextQuery } from '../store/search.js';
import type {
  AgentSearch,
  AgentSearchRow,
  AlmanacSearchRow,
  SearchType,
} from '../store/repositories/discovery.js';
import type { AlmanacMetadata } from '../wire/almanac.js';
import type { Endpoint } from '../wire/common.js';
import { isoTimestamp } from '../wire/common.js';
import type {
  AgentGeoSearchCriteria,
  AgentSearchCriteria,
  AlmanacSearchRecord,
  GeoLocation,
  SearchAgent,
} from '../wire/discovery.js';
import { DOMAIN_NAME_PATTERN } from '../wire/domain-name.js';
import { canonicalAgentAddress } from '../wire/formats.js';
import { normaliseDigest, type AlmanacService, type AlmanacEntry } from './almanac.js';
import type { DomainsService } from './domains.js';

const DIGEST = /^(proto:)?[0-9a-f]{64}$/i;
const RECENT_LIMIT = 100;
const RECENT_INTERACTIONS_MS = 90 * 24 * 3600 * 1000;
const MAX_WORDS = 10;
const HANDLE = /^[a-z0-9]+(-[a-z0-9]+)*$/;
const DOMAIN = new RegExp(DOMAIN_NAME_PATTERN);
const EARTH_RADIUS_M = 6_371_008.8;

/** The words of a search: letters and digits, lower case; what the full-text indexes see. */
function searchWords(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])
    .map((word) => word.slice(0, 64))
    .slice(0, MAX_WORDS);
}

/**
 * Discovery: which agents serve a protocol (uAgents' broadcast), the registry's search by text
 * with filters and orderings, search by distance, and resolution of any identifier (address,
 * handle or domain). Relevance and filters are the database's work; nothing scans in here.
 */
export class DiscoveryService {
  constructor(
    private readonly store: Store,
    private readonly almanac: AlmanacService,
    private readonly domains: DomainsService,
    private readonly clock: Clock,
  ) {}

  /**
   * A protocol digest (with or without `proto:`) finds every Almanac registration declaring
   * it; other text the registrations of agents whose listing matches. Active agents first.
   */
  async searchAlmanac(text: string, offset = 0, limit = 1000): Promise<AlmanacSearchRecord[]> {
    const discovery = this.store.repos.discovery;
    const now = this.clock.now();
    const trimmed = text.trim();
    let rows: AlmanacSearchRow[];
    if (DIGEST.test(trimmed)) {
      rows = await discovery.almanacByProtocol(normaliseDigest(trimmed.toLowerCase()), now, {
        offset,
        limit,
      });
    } else if (trimmed.toLowerCase().startsWith('proto:')) {
      throw RequestValidationError.single(
        ['body', 'text'],
        'a protocol digest is proto: followed by 64 hexadecimal digits',
        'string_pattern_mismatch',
      );
    } else {
      const words = searchWords(trimmed);
      if (words.length === 0) return [];
      rows = await discovery.almanacByText({ words, exact: false }, now, { offset, limit });
    }
    return rows.map((row) => this.almanacRecord(row));
  }

  /** The agents that registered most recently, and are still registered. */
  async recentAlmanac(): Promise<AlmanacSearchRecord[]> {
    const rows = await this.store.repos.discovery.almanacRecent(this.clock.now(), RECENT_LIMIT);
    return rows.map((row) => this.almanacRecord(row));
  }

  /** The registry's search, in the Search API's terms. */
  async searchAgents(criteria: AgentSearchCriteria): Promise<SearchAgent[]> {
    const search = this.agentSearch(criteria);
    if (!search) return [];
    return this.searchRecords(await this.store.repos.discovery.searchAgents(search));
  }

  /**
   * Listings whose metadata carries a geolocation whose area overlaps the circle asked for,
   * nearest first. The database finds the candidates; distances are computed here.
   */
  async searchGeo(criteria: AgentGeoSearchCriteria): Promise<SearchAgent[]> {
    const search = this.agentSearch(criteria);
    if (!search) return [];
    const rows = await this.store.repos.discovery.searchAgents({ ...search, geo: true });
    const { latitude, longitude, radius } = criteria.geo_filter;
    const near = rows
      .map((row) => ({ row, location: geoLocationOf(row) }))
      .filter(
        (entry): entry is { row: AgentSearchRow; location: GeoLocation } => entry.location !== null,
      )
      .map((entry) => ({
        ...entry,
        distance: distanceM(latitude, longitude, entry.location.latitude, entry.location.longitude),
      }))
      .filter((entry) => entry.distance <= radius + entry.location.radius)
      .sort((a, b) => a.distance - b.distance || a.row.address.localeCompare(b.row.address));
    const page = near.slice(search.offset, search.offset + search.limit);
    return this.searchRecords(page.map((entry) => entry.row));
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
      named = await this.store.repos.discovery.addressOfHandle(id);
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
    // Every listing here is a community one: categories other than that match nothing.
    const categories = criteria.filters?.category ?? [];
    if (categories.length > 0 && !categories.includes('community')) return undefined;
    return {
      now,
      recentSince: now - RECENT_INTERACTIONS_MS,
      ...(textQuery && { text: textQuery }),
      ...(address !== undefined && { address }),
      states: criteria.filters?.state ?? [],
      types: (criteria.filters?.agent_type ?? []) as SearchType[],
      sort: criteria.sort ?? 'relevancy',
      direction: criteria.direction ?? 'asc',
      offset: criteria.offset ?? 0,
      limit: criteria.limit ?? 30,
    };
  }

  private async searchRecords(rows: AgentSearchRow[]): Promise<SearchAgent[]> {
    const perRow = rows.map((row) => (JSON.parse(row.protocols) as string[]).map(normaliseDigest));
    const names = await this.store.repos.discovery.protocolNames([...new Set(perRow.flat())]);
    return rows.map((row, index) => {
      const profile = JSON.parse(row.profile) as {
        description?: string;
        readme?: string;
        avatar_url?: string;
      };
      const metadata = parseObject(row.metadata) ?? parseObject(row.almanac_metadata);
      return {
        address: row.address,
        name: row.name,
        description: profile.description ?? '',
        readme: profile.readme ?? '',
        protocols: perRow[index]!.map((digest) => ({
          name: names.get(digest)?.name ?? '',
          version: names.get(digest)?.version ?? '',
          digest,
        })),
        avatar_href: profile.avatar_url ? profile.avatar_url : null,
        handle: row.handle,
        domain: row.domain,
        metadata,
        total_interactions: row.total_interactions,
        recent_interactions: row.recent_interactions,
        rating: null,
        status: row.status,
        type: row.type,
        category: 'community',
        featured: false,
        geo_location: geoLocationOf(row),
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
