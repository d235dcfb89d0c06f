import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { DialectName } from '../dialect.js';
import type { Database } from '../schema.js';
import { fullTextSearch, type AgentText, type FullTextSearch, type TextQuery } from '../search.js';

/** An Almanac registration as search answers it, with what other tables know of the agent. */
export interface AlmanacSearchRow {
  address: string;
  endpoints: string;
  protocols: string;
  metadata: string | null;
  expires_at: number;
  /** 1 when unexpired and not marked inactive by the agent's latest status update. */
  active: number;
  name: string | null;
  domain: string | null;
}

/** A page of an ordered answer. */
export interface Page {
  offset: number;
  limit: number;
}

export type SearchSort = 'relevancy' | 'created-at' | 'last-modified' | 'interactions';
export type SearchStatus = 'active' | 'inactive';
export type SearchType = 'hosted' | 'local' | 'mailbox' | 'proxy' | 'custom';

export interface AgentSearch extends Page {
  now: number;
  /** Interactions since then count as recent. */
  recentSince: number;
  text?: TextQuery;
  address?: string;
  states: SearchStatus[];
  types: SearchType[];
  sort: SearchSort;
  direction: 'asc' | 'desc';
  /** Only listings whose metadata mentions a geolocation; offset and limit are then not applied. */
  geo?: boolean;
}

/** A registry listing as search answers it. */
export interface AgentSearchRow {
  address: string;
  name: string;
  handle: string | null;
  profile: string;
  protocols: string;
  metadata: string | null;
  almanac_metadata: string | null;
  registered_at: number;
  updated_at: number;
  status: SearchStatus;
  type: SearchType;
  domain: string | null;
  total_interactions: number;
  recent_interactions: number;
}

const MAILBOX_PATH = '%/v2/agents/mailbox/submit%';
const PROXY_PATH = '%/v2/agents/proxy/submit%';

/**
 * Whether the Almanac registration `r` counts as active at `now`: unexpired, and not set
 * inactive by its latest status update (`s`; none means active).
 */
const activeAt = (now: number) =>
  sql<boolean>`r.expires_at > ${now} and coalesce(s.is_active, 1) = 1`;

/** Discovery reads: Almanac search and the registry's search. */
export class DiscoveryRepository {
  private readonly fullText: FullTextSearch;

  constructor(
    private readonly db: Kysely<Database>,
    dialect: DialectName,
  ) {
    this.fullText = fullTextSearch(dialect);
  }

  /** Keeps the full-text index in step with a listing; call in the transaction that writes it. */
  indexAgent(text: AgentText): Promise<void> {
    return this.fullText.indexAgentTexts(this.db, [text]);
  }

  removeAgent(address: string): Promise<void> {
    return this.fullText.removeAgentText(this.db, address);
  }

  /** The agent a handle names. */
  async addressOfHandle(handle: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('agents')
      .select('address')
      .where('handle', '=', handle)
      .executeTakeFirst();
    return row?.address;
  }

  /** Names and versions of stored protocol manifests, by digest. */
  async protocolNames(digests: string[]): Promise<Map<string, { name: string; version: string }>> {
    const found = new Map<string, { name: string; version: string }>();
    if (digests.length === 0) return found;
    const rows = await this.db
      .selectFrom('almanac_manifests')
      .select(['digest', 'manifest'])
      .where('digest', 'in', digests)
      .execute();
    for (const row of rows) {
      const { metadata } = JSON.parse(row.manifest) as {
        metadata?: { name?: unknown; version?: unknown };
      };
      found.set(row.digest, {
        name: typeof metadata?.name === 'string' ? metadata.name : '',
        version: typeof metadata?.version === 'string' ? metadata.version : '',
      });
    }
    return found;
  }

  private almanacRecords(now: number, db = this.db) {
    return db
      .selectFrom('almanac_registrations as r')
      .leftJoin('almanac_statuses as s', 's.address', 'r.address')
      .leftJoin('agents as a', 'a.address', 'r.address')
      .leftJoin('domain_agents as d', 'd.address', 'r.address')
      .select([
        'r.address',
        'r.endpoints',
        'r.protocols',
        'r.metadata',
        'r.expires_at',
        'a.name',
        'd.domain',
        sql<number>`case when ${activeAt(now)} then 1 else 0 end`.as('active'),
      ]);
  }

  /** Registrations declaring the protocol (`proto:` and hex), active first, newest first. */
  async almanacByProtocol(digest: string, now: number, page: Page): Promise<AlmanacSearchRow[]> {
    const rows = await this.almanacRecords(now)
      .innerJoin('almanac_protocols as p', 'p.address', 'r.address')
      .where('p.digest', '=', digest)
      .orderBy('active', 'desc')
      .orderBy('r.updated_at', 'desc')
      .orderBy('r.address')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    return rows.map(numeric);
  }

  /** Registrations of agents whose registry listing matches the text, active and relevant first. */
  async almanacByText(query: TextQuery, now: number, page: Page): Promise<AlmanacSearchRow[]> {
    const rows = await this.fullText.withFewMatches(this.db, (db) =>
      this.almanacRecords(now, db)
        .innerJoin(this.fullText.matchingAgents(query).as('m'), 'm.address', 'r.address')
        .orderBy('active', 'desc')
        .orderBy('m.score', 'desc')
        .orderBy('r.address')
        .limit(page.limit)
        .offset(page.offset)
        .execute(),
    );
    return rows.map(numeric);
  }

  /** The most recently (re)registered agents. */
  async almanacRecent(now: number, limit: number): Promise<AlmanacSearchRow[]> {
    const rows = await this.almanacRecords(now)
      .where('r.expires_at', '>', now)
      .orderBy('r.updated_at', 'desc')
      .orderBy('r.address')
      .limit(limit)
      .execute();
    return rows.map(numeric);
  }

  /** The registry's search: filters, full-text relevance and orderings, all in SQL. */
  async searchAgents(search: AgentSearch): Promise<AgentSearchRow[]> {
    const rows = search.text
      ? await this.fullText.withFewMatches(this.db, (db) => this.searchQuery(search, db).execute())
      : await this.searchQuery(search, this.db).execute();
    return rows.map((row) => ({
      ...row,
      registered_at: Number(row.registered_at),
      updated_at: Number(row.updated_at),
      total_interactions: Number(row.total_interactions),
      recent_interactions: Number(row.recent_interactions),
    }));
  }

  private searchQuery(search: AgentSearch, db: Kysely<Database>) {
    const { now } = search;
    const endpoints = sql`coalesce(r.endpoints, a.endpoints)`;
    const status = sql<SearchStatus>`case when ${activeAt(now)} then 'active' else 'inactive' end`;
    const type = sql<SearchType>`case
      when a.agent_type in ('hosted', 'custom', 'mailbox', 'proxy') then a.agent_type
      when ${endpoints} like ${MAILBOX_PATH} then 'mailbox'
      when ${endpoints} like ${PROXY_PATH} then 'proxy'
      else 'local' end`;
    const total = sql<number>`(select count(*) from interactions i where i.target = a.address)`;
    const recent = sql<number>`(select count(*) from interactions i where i.target = a.address and i.created_at >= ${search.recentSince})`;

    let query = db
      .selectFrom('agents as a')
      .leftJoin('almanac_registrations as r', 'r.address', 'a.address')
      .leftJoin('almanac_statuses as s', 's.address', 'a.address')
      .leftJoin('domain_agents as d', 'd.address', 'a.address')
      .select([
        'a.address',
        'a.name',
        'a.handle',
        'a.profile',
        'a.protocols',
        'a.metadata',
        'r.metadata as almanac_metadata',
        'a.registered_at',
        'a.updated_at',
        'd.domain',
        status.as('status'),
        type.as('type'),
        total.as('total_interactions'),
        recent.as('recent_interactions'),
      ]);
    let score: RawBuilder<number> | undefined;
    if (search.text) {
      query = query.innerJoin(
        this.fullText.matchingAgents(search.text).as('m'),
        'm.address',
        'a.address',
      );
      score = sql<number>`m.score`;
    }
    if (search.address !== undefined) query = query.where('a.address', '=', search.address);
    if (search.states.length > 0) query = query.where(status, 'in', search.states);
    if (search.types.length > 0) query = query.where(type, 'in', search.types);
    if (search.geo) {
      query = query.where((eb) =>
        eb.or([
          eb('a.metadata', 'like', '%geolocation%'),
          eb('r.metadata', 'like', '%geolocation%'),
        ]),
      );
    }

    const direction = search.direction;
    switch (search.sort) {
      case 'created-at':
        query = query.orderBy('a.registered_at', direction);
        break;
      case 'last-modified':
        query = query.orderBy('a.updated_at', direction);
        break;
      case 'interactions':
        query = query.orderBy(total, direction);
        break;
      case 'relevancy':
        // The most relevant first, whatever the direction; without text, the newest.
        query = score ? query.orderBy(score, 'desc') : query.orderBy('a.registered_at', 'desc');
        break;
    }
    query = query.orderBy('a.address');
    if (!search.geo) query = query.limit(search.limit).offset(search.offset);
    return query;
  }
}

function numeric<T extends { expires_at: number; active: number }>(row: T): T {
  return { ...row, expires_at: Number(row.expires_at), active: Number(row.active) };
}
