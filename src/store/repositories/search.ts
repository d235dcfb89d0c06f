import { sql, type Kysely, type RawBuilder } from 'kysely';
import { CompiledStatements } from '../compiled.js';
import type { DialectName } from '../dialect.js';
import { activeOfJoined, presenceGoneOfJoined } from './almanac.js';
import type { Database } from '../schema.js';
import {
  fullTextSearch,
  type AgentText,
  type FullTextSearch,
  type TextQuery,
} from '../full-text.js';

/** An Almanac registration as search answers it, with what other tables know of the agent. */
export interface AlmanacSearchRow {
  address: string;
  endpoints: string;
  protocols: string;
  metadata: string | null;
  expires_at: number;
  updated_at: number;
  /** 1 when active ({@link activeOfJoined}). */
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
export type SearchState = SearchStatus | 'responsive' | 'unresponsive';
export type SearchType = 'hosted' | 'local' | 'mailbox' | 'proxy' | 'custom' | 'a2a';
/** How an agent was registered, which agent_type filters may name beside how it is reached. */
export type RegistrationType = 'uagent' | 'a2a';

export interface AgentSearch extends Page {
  now: number;
  /** Interactions since then count as recent. */
  recentSince: number;
  /** Health probes sent since then make the success rate. */
  probesSince: number;
  text?: TextQuery;
  address?: string;
  /** Any of these (empty: any). */
  states: SearchState[];
  /** Any of these, hosting or registration types alike (empty: any). */
  types: (SearchType | RegistrationType)[];
  /** Any of these digests (`proto:` and hex), from the listing or the Almanac registration. */
  protocols: string[];
  /** Any of these tags (lower case), from metadata.tags of the listing or registration. */
  tags: string[];
  /** true: only agents with a geolocation (latitude and longitude); false: only without. */
  location?: boolean;
  hasReadme: boolean;
  /** At least this many interactions in all. */
  minInteractions?: number;
  /**
   * With text: the share (0 to 1) of the best matching listing's relevance a listing must
   * reach (the relevancy cutoff); 0 or absent keeps every match.
   */
  cutoff?: number;
  sort: SearchSort;
  direction: 'asc' | 'desc';
  /** Only listings with a geolocation, unpaged (the caller measures distances and pages). */
  geo?: boolean;
}

/** A search with the relevance its cutoff asks for, once the best score is known. */
type CutSearch = AgentSearch & { minScore?: number | undefined };

/** A registry listing as search answers it. */
export interface AgentSearchRow {
  address: string;
  name: string;
  handle: string | null;
  profile: string;
  protocols: string;
  metadata: string | null;
  almanac_metadata: string | null;
  /** The Almanac registration's protocols (JSON array text), if it has one. */
  almanac_protocols: string | null;
  /** The Almanac registration's network prefix, if it names one. */
  prefix: string | null;
  registered_at: number;
  updated_at: number;
  status: SearchStatus;
  /** 1 when the last forward to the agent failed, or it stopped answering health probes. */
  unresponsive: number;
  /** The share of its recent health probes it answered; null when none was sent. */
  success_rate: number | null;
  type: SearchType;
  domain: string | null;
  total_interactions: number;
  recent_interactions: number;
}

/** One stored answer of the Search API. */
export interface SearchPageRow {
  search_id: string;
  request: string;
  addresses: string[];
  page_offset: number;
  total: number;
  created_at: number;
  expires_at: number;
}

export interface SearchClickRow {
  search_id: string;
  address: string;
  contract: string;
  page_index: number;
  created_at: number;
  expires_at: number;
}

/** What an Almanac search answers of each registration (named: a kept plan's columns). */
const ALMANAC_SEARCH_COLUMNS = [
  'address',
  'endpoints',
  'protocols',
  'metadata',
  'expires_at',
  'updated_at',
  'name',
  'domain',
  'active',
] as const;

const MAILBOX_PATH = '%/v2/agents/mailbox/submit%';
const PROXY_PATH = '%/v2/agents/proxy/submit%';

/** Search reads: Almanac search and the registry's search. */
export class SearchRepository {
  private readonly fullText: FullTextSearch;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectName,
    /** The protocol search's statement, compiled once and kept prepared. */
    private readonly statements = new CompiledStatements(),
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

  /**
   * Almanac registrations as search answers them. With the agent's rows that say whether it is
   * active ({@link activeOfJoined}), each joined by its address; a text search's `matching`
   * listings (`m`) joined first.
   */
  private almanacRegistrations(now: number, db = this.db, matching?: TextQuery) {
    let registrations = db.selectFrom('almanac_registrations as r');
    if (matching) {
      registrations = registrations.innerJoin(
        this.fullText.matchingAgents(matching).as('m'),
        'm.address',
        'r.address',
      );
    }
    return (
      registrations
        .leftJoin('agents as a', 'a.address', 'r.address')
        .leftJoin('domain_agents as d', 'd.address', 'r.address')
        .leftJoin('agent_enrolments as e', 'e.address', 'r.address')
        .leftJoin('almanac_statuses as st', 'st.address', 'r.address')
        .leftJoin('hosted_agents as ha', 'ha.address', 'r.address')
        .leftJoin('agent_presence as p', 'p.address', 'r.address')
        // An expired registration of an agent whose listing answers in its place (enrolled, with
        // endpoints: see almanacListings) is left out, so that the agent is answered once.
        .where(
          sql<boolean>`not (r.expires_at <= ${now} and e.address is not null
          and coalesce(a.endpoints <> '[]', false))`,
        )
        .select([
          'r.address',
          'r.endpoints',
          'r.protocols',
          'r.metadata',
          'r.expires_at',
          'r.updated_at',
          'a.name',
          'd.domain',
          sql<number>`case when ${activeOfJoined(now)} then 1 else 0 end`.as('active'),
        ])
    );
  }

  /**
   * The listings of enrolled agents that registered themselves (the agentverse-sdk never
   * registers in the Almanac) and have no unexpired registration: the Almanac resolves them to
   * their listing's endpoints and protocols, for `lifetime` from now, and search finds them so.
   *
   * The reading starts from the enrolments (some of the agents at most): as a cross join, which
   * SQLite keeps in its order where it would read every agent instead, and which PostgreSQL
   * plans as the inner join it is. A text search's `matching` listings (`m`) are joined next
   * (the estimate of a word's matches being no guide, a text search joins in the written order).
   */
  private almanacListings(now: number, lifetime: number, db = this.db, matching?: TextQuery) {
    let enrolled = db
      .selectFrom('agent_enrolments as e')
      .crossJoin('agents as a')
      .whereRef('a.address', '=', 'e.address');
    if (matching) {
      enrolled = enrolled.innerJoin(
        this.fullText.matchingAgents(matching).as('m'),
        'm.address',
        'a.address',
      );
    }
    return enrolled
      .leftJoin('almanac_registrations as r', 'r.address', 'a.address')
      .leftJoin('domain_agents as d', 'd.address', 'a.address')
      .leftJoin('almanac_statuses as st', 'st.address', 'a.address')
      .leftJoin('hosted_agents as ha', 'ha.address', 'a.address')
      .leftJoin('agent_presence as p', 'p.address', 'a.address')
      .where('a.endpoints', '<>', '[]')
      .where((eb) => eb.or([eb('r.address', 'is', null), eb('r.expires_at', '<=', now)]))
      .select([
        'a.address',
        'a.endpoints',
        'a.protocols',
        sql<string | null>`cast(null as text)`.as('metadata'),
        sql<number>`cast(${now + lifetime} as bigint)`.as('expires_at'),
        'a.updated_at',
        'a.name',
        'd.domain',
        sql<number>`case when ${activeOfJoined(now)} then 1 else 0 end`.as('active'),
      ]);
  }

  /**
   * Registrations (and self-registered listings, which resolve alike) declaring the protocol
   * (`proto:` and hex), active first, newest first.
   */
  async almanacByProtocol(
    digest: string,
    now: number,
    lifetime: number,
    page: Page,
  ): Promise<AlmanacSearchRow[]> {
    const spellings = [digest, digest.slice('proto:'.length)] as const;
    // Kept prepared: ctx.broadcast sends this search, and PostgreSQL took four times as long
    // to plan it as to run it. Its values in the order the statement binds them.
    const { rows } = await this.statements.execute<AlmanacSearchRow>(
      this.db,
      'search.almanac_by_protocol',
      [
        now,
        now,
        now,
        digest,
        now + lifetime,
        now,
        now,
        '[]',
        now,
        ...spellings,
        page.limit,
        page.offset,
      ],
      () => {
        // From the digest's entries of the protocol index to their registrations: `in`, where
        // a correlated `exists` had SQLite look up every registration in the index instead.
        const registered = this.almanacRegistrations(now).where('r.address', 'in', (eb) =>
          eb
            .selectFrom('almanac_protocols as ap')
            .select('ap.address')
            .where('ap.digest', '=', digest),
        );
        const listed = this.almanacListings(now, lifetime).where(
          this.json().arrayHasAny(sql`a.protocols`, [...spellings]),
          '=',
          sql<boolean>`true`,
        );
        return this.db
          .selectFrom(registered.unionAll(listed).as('x'))
          .select(ALMANAC_SEARCH_COLUMNS)
          .orderBy('active', 'desc')
          .orderBy('updated_at', 'desc')
          .orderBy('address')
          .limit(page.limit)
          .offset(page.offset)
          .compile();
      },
      { prepared: true },
    );
    return rows.map(numeric);
  }

  /**
   * Registrations (and self-registered listings) of agents whose registry listing matches the
   * text, active and relevant first.
   */
  async almanacByText(
    query: TextQuery,
    now: number,
    lifetime: number,
    page: Page,
  ): Promise<AlmanacSearchRow[]> {
    const rows = await this.fullText.withFewMatches(this.db, (db) => {
      const registered = this.almanacRegistrations(now, db, query).select(
        sql<number>`m.score`.as('score'),
      );
      const listed = this.almanacListings(now, lifetime, db, query).select(
        sql<number>`m.score`.as('score'),
      );
      return db
        .selectFrom(registered.unionAll(listed).as('x'))
        .selectAll()
        .orderBy('active', 'desc')
        .orderBy('score', 'desc')
        .orderBy('address')
        .limit(page.limit)
        .offset(page.offset)
        .execute();
    });
    return rows.map(numeric);
  }

  /** The most recently (re)registered agents (and self-registered listings). */
  async almanacRecent(now: number, lifetime: number, limit: number): Promise<AlmanacSearchRow[]> {
    // The most recent unexpired registrations first, by time, then what search answers of
    // those alone: PostgreSQL read every registration's state, then kept `limit` of them.
    const registered = this.almanacRegistrations(now).where('r.address', 'in', (eb) =>
      eb
        .selectFrom('almanac_registrations as latest')
        .select('latest.address')
        .where('latest.expires_at', '>', now)
        .orderBy('latest.updated_at', 'desc')
        .orderBy('latest.address')
        .limit(limit),
    );
    const listed = this.almanacListings(now, lifetime);
    const rows = await this.db
      .selectFrom(registered.unionAll(listed).as('x'))
      .selectAll()
      .orderBy('updated_at', 'desc')
      .orderBy('address')
      .limit(limit)
      .execute();
    return rows.map(numeric);
  }

  /**
   * The registry's search: filters, full-text relevance and orderings, all in SQL; with how
   * many listings match in all (geo searches: the candidates, unpaged, and no count).
   */
  async searchAgents(search: AgentSearch): Promise<{ rows: AgentSearchRow[]; total: number }> {
    const run = async (db: Kysely<Database>) => {
      const cut: CutSearch = { ...search, minScore: await this.minScore(search, db) };
      const rows = await this.pageQuery(cut, db).execute();
      if (search.geo) return { rows, total: rows.length };
      // A full page from the start is everything; otherwise the database counts.
      if (search.offset === 0 && rows.length < search.limit) return { rows, total: rows.length };
      const counted = await db
        .selectFrom(this.filteredQuery(cut, db).select('a.address').as('f'))
        .select(sql<number>`count(*)`.as('n'))
        .executeTakeFirstOrThrow();
      return { rows, total: Number(counted.n) };
    };
    const { rows, total } = search.text
      ? await this.fullText.withFewMatches(this.db, run)
      : await run(this.db);
    return {
      total,
      rows: rows.map((row) => ({
        ...row,
        registered_at: Number(row.registered_at),
        updated_at: Number(row.updated_at),
        unresponsive: Number(row.unresponsive),
        total_interactions: Number(row.total_interactions),
        recent_interactions: Number(row.recent_interactions),
        success_rate: row.success_rate === null ? null : Number(row.success_rate),
      })),
    };
  }

  /**
   * The relevance a listing must reach under the search's cutoff: that share of the best
   * score among the listings its text and filters match. Undefined without a cutoff.
   */
  private async minScore(search: AgentSearch, db: Kysely<Database>): Promise<number | undefined> {
    if (!search.text || !search.cutoff) return undefined;
    // The best row rather than max(): SQLite ranks only where the full-text match is queried.
    const best = await this.filteredQuery(search, db)
      .select(sql<number>`m.score`.as('score'))
      .orderBy(sql`m.score`, 'desc')
      .limit(1)
      .executeTakeFirst();
    return best === undefined ? undefined : search.cutoff * Number(best.score);
  }

  /** JSON helpers of each database, on columns holding JSON text. */
  private json() {
    if (this.dialect === 'sqlite') {
      return {
        /** Whether the JSON array text `column` holds any of `values`. */
        arrayHasAny: (column: RawBuilder<unknown>, values: string[]) =>
          sql<boolean>`exists (select 1 from json_each(${column}) j where j.value in (${sql.join(values)}))`,
        /** Whether `column`'s `tags` member is an array holding any of `values`, in lower case. */
        tagsHaveAny: (column: RawBuilder<unknown>, values: string[]) =>
          sql<boolean>`(json_type(${column}, '$.tags') = 'array' and exists (select 1 from json_each(${column}, '$.tags') j where j.type = 'text' and lower(j.value) in (${sql.join(values)})))`,
        /** Whether `column`'s geolocation has a latitude and a longitude. */
        hasGeo: (column: RawBuilder<unknown>) =>
          sql<boolean>`(json_type(${column}, '$.geolocation.latitude') in ('integer', 'real', 'text') and json_type(${column}, '$.geolocation.longitude') in ('integer', 'real', 'text'))`,
        readme: sql<string>`coalesce(json_extract(a.profile, '$.readme'), '')`,
      };
    }
    return {
      arrayHasAny: (column: RawBuilder<unknown>, values: string[]) =>
        sql<boolean>`exists (select 1 from jsonb_array_elements_text(${column}::jsonb) j(v) where j.v in (${sql.join(values)}))`,
      tagsHaveAny: (column: RawBuilder<unknown>, values: string[]) =>
        sql<boolean>`(jsonb_typeof(${column}::jsonb -> 'tags') = 'array' and exists (select 1 from jsonb_array_elements(${column}::jsonb -> 'tags') j(v) where jsonb_typeof(j.v) = 'string' and lower(j.v #>> '{}') in (${sql.join(values)})))`,
      hasGeo: (column: RawBuilder<unknown>) =>
        sql<boolean>`(jsonb_typeof(${column}::jsonb -> 'geolocation' -> 'latitude') in ('number', 'string') and jsonb_typeof(${column}::jsonb -> 'geolocation' -> 'longitude') in ('number', 'string'))`,
      readme: sql<string>`coalesce(a.profile::jsonb ->> 'readme', '')`,
    };
  }

  /** What a search computes of each listing, in SQL, of the rows {@link pageQuery} joins. */
  private expressions(search: AgentSearch) {
    const json = this.json();
    const endpoints = sql`coalesce(r.endpoints, a.endpoints)`;
    return {
      status: sql<SearchStatus>`case when ${activeOfJoined(search.now)} then 'active' else 'inactive' end`,
      // Hosted here first; then as it was registered (an A2A bridge is `a2a`, as its listing
      // says); then how a uAgent is reached.
      type: sql<SearchType>`case
        when ha.address is not null then 'hosted'
        when a.agent_type in ('hosted', 'custom', 'mailbox', 'proxy', 'a2a') then a.agent_type
        when ${endpoints} like ${MAILBOX_PATH} then 'mailbox'
        when ${endpoints} like ${PROXY_PATH} then 'proxy'
        else 'local' end`,
      // Its forwards fail, it stopped answering its health probes, or its status says nobody
      // is there (offline or unreachable: the rule that makes it inactive in the Almanac too).
      unresponsive: sql<number>`case when (p.forward_failed_at is not null and coalesce(p.forward_ok_at, 0) < p.forward_failed_at)
        or coalesce(hp.healthy = 0, false)
        or ${presenceGoneOfJoined(search.now)} then 1 else 0 end`,
      successRate: sql<number | null>`(select avg(pr.answered) from agent_probe_results pr
        where pr.address = a.address and pr.sent_at >= ${search.probesSince})`,
      total: sql<number>`(select count(*) from interactions i where i.target = a.address)`,
      recent: sql<number>`(select count(*) from interactions i where i.target = a.address and i.created_at >= ${search.recentSince})`,
      // Null metadata makes the test null, never false: coalesce, so that `not` means without.
      hasGeo: sql<boolean>`coalesce(${json.hasGeo(sql`a.metadata`)} or ${json.hasGeo(sql`r.metadata`)}, false)`,
    };
  }

  /**
   * The listings matching the search's text and filters (their columns chosen by the caller):
   * each listing `a` (after its text's matches `m`) with its registration `r`, and, when the
   * filters ask for its status, type or responsiveness, the rows its {@link expressions} read,
   * each joined by the agent's address. A page reads them for its own listings only
   * ({@link pageQuery}).
   */
  private filteredQuery(search: CutSearch, db: Kysely<Database>) {
    const json = this.json();
    const { status, type, unresponsive, total, hasGeo } = this.expressions(search);
    const listingMetadata = sql`a.metadata`;
    const almanacMetadata = sql`r.metadata`;

    // The text's matches first: text searches join in the order written (withFewMatches).
    const listings = search.text
      ? db
          .selectFrom(this.fullText.matchingAgents(search.text).as('m'))
          .innerJoin('agents as a', 'a.address', 'm.address')
      : db.selectFrom('agents as a');
    let query = listings.leftJoin('almanac_registrations as r', 'r.address', 'a.address');
    if (search.states.length > 0 || search.types.length > 0) {
      // As pageQuery joins them for its page.
      query = query
        .leftJoin('agent_presence as p', 'p.address', 'a.address')
        .leftJoin('agent_enrolments as e', 'e.address', 'a.address')
        .leftJoin('almanac_statuses as st', 'st.address', 'a.address')
        .leftJoin('hosted_agents as ha', 'ha.address', 'a.address')
        .leftJoin('agent_probes as hp', 'hp.address', 'a.address');
    }
    if (search.minScore !== undefined) query = query.where(sql`m.score`, '>=', search.minScore);
    if (search.address !== undefined) query = query.where('a.address', '=', search.address);
    if (search.states.length > 0) {
      const states = search.states;
      query = query.where((eb) =>
        eb.or(
          states.map((state) => {
            switch (state) {
              case 'active':
              case 'inactive':
                return eb(status, '=', state);
              case 'responsive':
                return eb(unresponsive, '=', 0);
              case 'unresponsive':
                return eb(unresponsive, '=', 1);
            }
          }),
        ),
      );
    }
    if (search.types.length > 0) {
      const hosting = search.types.filter((t) => t !== 'uagent' && t !== 'a2a');
      const registration = search.types.filter((t) => t === 'uagent' || t === 'a2a');
      query = query.where((eb) =>
        eb.or([
          ...(hosting.length > 0 ? [eb(type, 'in', hosting)] : []),
          ...(registration.length > 0 ? [eb('a.agent_type', 'in', registration)] : []),
        ]),
      );
    }
    if (search.protocols.length > 0) {
      const digests = search.protocols;
      // Listings keep digests as they were given, with or without proto:.
      const spellings = digests.flatMap((d) => [d, d.slice('proto:'.length)]);
      query = query.where((eb) =>
        eb.or([
          eb.exists(
            eb
              .selectFrom('almanac_protocols as ap')
              .select('ap.address')
              .whereRef('ap.address', '=', 'a.address')
              .where('ap.digest', 'in', digests),
          ),
          eb(json.arrayHasAny(sql`a.protocols`, spellings), '=', sql<boolean>`true`),
        ]),
      );
    }
    if (search.tags.length > 0) {
      const tags = search.tags;
      query = query.where(
        sql<boolean>`(${json.tagsHaveAny(listingMetadata, tags)} or ${json.tagsHaveAny(almanacMetadata, tags)})`,
        '=',
        sql<boolean>`true`,
      );
    }
    if (search.location === true || search.geo) {
      query = query.where(hasGeo, '=', sql<boolean>`true`);
    } else if (search.location === false) {
      query = query.where(sql<boolean>`not ${hasGeo}`, '=', sql<boolean>`true`);
    }
    if (search.hasReadme) query = query.where(sql`trim(${json.readme})`, '<>', '');
    if (search.minInteractions !== undefined && search.minInteractions > 0) {
      query = query.where(total, '>=', search.minInteractions);
    }
    return query;
  }

  /**
   * A page of the listings matching the search, in its order. The page is chosen first, from
   * what the filters and the order read; then what the answer shows of each of its listings is
   * read for those alone: a word that matches every listing costs the page's status of thirty
   * agents, not of all of them.
   */
  private pageQuery(search: CutSearch, db: Kysely<Database>) {
    const { status, type, unresponsive, total, recent, successRate } = this.expressions(search);
    const [key, keyDirection] = this.order(search, total);
    let page = this.filteredQuery(search, db)
      .select(['a.address', key.as('sort_key')])
      .orderBy(key, keyDirection)
      .orderBy('a.address');
    if (!search.geo) page = page.limit(search.limit).offset(search.offset);
    return db
      .selectFrom(page.as('page'))
      .innerJoin('agents as a', 'a.address', 'page.address')
      .leftJoin('almanac_registrations as r', 'r.address', 'a.address')
      .leftJoin('domain_agents as d', 'd.address', 'a.address')
      .leftJoin('agent_presence as p', 'p.address', 'a.address')
      .leftJoin('agent_enrolments as e', 'e.address', 'a.address')
      .leftJoin('almanac_statuses as st', 'st.address', 'a.address')
      .leftJoin('hosted_agents as ha', 'ha.address', 'a.address')
      .leftJoin('agent_probes as hp', 'hp.address', 'a.address')
      .select([
        'a.address',
        'a.name',
        'a.handle',
        'a.profile',
        'a.protocols',
        'a.metadata',
        'r.metadata as almanac_metadata',
        'r.protocols as almanac_protocols',
        'r.prefix',
        'a.registered_at',
        'a.updated_at',
        'd.domain',
        status.as('status'),
        unresponsive.as('unresponsive'),
        type.as('type'),
        total.as('total_interactions'),
        recent.as('recent_interactions'),
        successRate.as('success_rate'),
      ])
      .orderBy(sql`page.sort_key`, keyDirection)
      .orderBy('a.address');
  }

  /** What a search's page is ordered by (before the address), and in which direction. */
  private order(
    search: AgentSearch,
    total: RawBuilder<number>,
  ): [RawBuilder<number>, 'asc' | 'desc'] {
    switch (search.sort) {
      case 'created-at':
        return [sql<number>`a.registered_at`, search.direction];
      case 'last-modified':
        return [sql<number>`a.updated_at`, search.direction];
      case 'interactions':
        return [total, search.direction];
      case 'relevancy':
        // The most relevant first, whatever the direction; without text, the newest.
        return search.text
          ? [sql<number>`m.score`, 'desc']
          : [sql<number>`a.registered_at`, 'desc'];
    }
  }

  /** The tags listed agents carry (metadata.tags, lower case), most used first. */
  async tags(limit: number): Promise<{ tag: string; agents: number }[]> {
    const rows =
      this.dialect === 'sqlite'
        ? await sql<{ tag: string; agents: number }>`
            select tag, count(distinct address) as agents from (
              select a.address, lower(j.value) as tag from agents a, json_each(a.metadata, '$.tags') j
                where json_type(a.metadata, '$.tags') = 'array' and j.type = 'text'
              union all
              select a.address, lower(j.value) as tag
                from agents a join almanac_registrations r on r.address = a.address,
                json_each(r.metadata, '$.tags') j
                where json_type(r.metadata, '$.tags') = 'array' and j.type = 'text'
            ) t where tag <> '' group by tag order by agents desc, tag limit ${limit}`.execute(
            this.db,
          )
        : await sql<{ tag: string; agents: number }>`
            select tag, count(distinct address) as agents from (
              select a.address, lower(j.v #>> '{}') as tag
                from agents a, jsonb_array_elements(case when jsonb_typeof(a.metadata::jsonb -> 'tags') = 'array' then a.metadata::jsonb -> 'tags' else '[]'::jsonb end) j(v)
                where jsonb_typeof(j.v) = 'string'
              union all
              select a.address, lower(j.v #>> '{}') as tag
                from agents a join almanac_registrations r on r.address = a.address,
                jsonb_array_elements(case when jsonb_typeof(r.metadata::jsonb -> 'tags') = 'array' then r.metadata::jsonb -> 'tags' else '[]'::jsonb end) j(v)
                where jsonb_typeof(j.v) = 'string'
            ) t where tag <> '' group by tag order by agents desc, tag limit ${limit}`.execute(
            this.db,
          );
    return rows.rows.map((row) => ({ tag: row.tag, agents: Number(row.agents) }));
  }

  /** Keeps one answer of the Search API until `expires_at`. */
  async recordSearchPage(page: SearchPageRow): Promise<void> {
    await this.db
      .insertInto('search_pages')
      .values({ ...page, addresses: JSON.stringify(page.addresses) })
      .execute();
  }

  /**
   * Whether a search is kept (until when: its last page's expiry) and whether any of its
   * pages answered `address`; undefined when no page of it is kept.
   */
  async keptSearch(
    searchId: string,
    address: string,
    now: number,
  ): Promise<{ expiresAt: number; answered: boolean } | undefined> {
    const row = await this.db
      .selectFrom('search_pages')
      .select([
        sql<number | null>`max(expires_at)`.as('expires_at'),
        // Addresses are stored quoted in a JSON array: a quoted match is an exact one.
        sql<number>`sum(case when addresses like ${`%"${address}"%`} then 1 else 0 end)`.as(
          'answered',
        ),
      ])
      .where('search_id', '=', searchId)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    if (!row || row.expires_at === null) return undefined;
    return { expiresAt: Number(row.expires_at), answered: Number(row.answered) > 0 };
  }

  async recordClick(click: SearchClickRow): Promise<void> {
    await this.db.insertInto('search_clicks').values(click).execute();
  }

  /** The clicks recorded against a search id, oldest first. */
  async clicks(searchId: string): Promise<SearchClickRow[]> {
    const rows = await this.db
      .selectFrom('search_clicks')
      .select(['search_id', 'address', 'contract', 'page_index', 'created_at', 'expires_at'])
      .where('search_id', '=', searchId)
      .orderBy('seq')
      .execute();
    return rows.map((row) => ({
      ...row,
      page_index: Number(row.page_index),
      created_at: Number(row.created_at),
      expires_at: Number(row.expires_at),
    }));
  }

  /** Deletes up to `batch` expired rows of `table`; how many went. */
  async purgeExpiredSearches(
    table: 'search_pages' | 'search_clicks',
    now: number,
    batch: number,
  ): Promise<number> {
    const result = await this.db
      .deleteFrom(table)
      .where(
        'seq',
        'in',
        this.db.selectFrom(table).select('seq').where('expires_at', '<=', now).limit(batch),
      )
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}

function numeric<T extends { expires_at: number; updated_at: number; active: number }>(row: T): T {
  return {
    ...row,
    expires_at: Number(row.expires_at),
    updated_at: Number(row.updated_at),
    active: Number(row.active),
  };
}
