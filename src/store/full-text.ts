import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { DialectName } from './dialect.js';
import type { Database } from './schema.js';
import { atomically } from './statements.js';

/** Migrations hold an untyped connection, repositories a typed one. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/** The text of a registry listing that full-text search looks at. */
export interface AgentText {
  address: string;
  name: string;
  handle: string;
  description: string;
  readme: string;
}

/** Words of a search, and whether each must appear whole (exact) or as a prefix. */
export interface TextQuery {
  words: string[];
  /** Every word must appear, whole; otherwise any word, or a word it begins. */
  exact: boolean;
}

/**
 * The full-text index of the registry (names, handles, descriptions, readmes): each
 * database's own engine, FTS5 on SQLite and a tsvector under GIN on PostgreSQL, both
 * implementations side by side. The search repository, migration 0006 and the benchmark's
 * seeding use it.
 */
export interface FullTextSearch {
  /** Creates the full-text index of the registry (migration 0006). */
  createAgentSearch(db: AnyDb): Promise<void>;
  dropAgentSearch(db: AnyDb): Promise<void>;
  /** Writes (or rewrites) listings' entries in the full-text index, at most 1,000 at once. */
  indexAgentTexts(db: AnyDb, texts: AgentText[]): Promise<void>;
  removeAgentText(db: AnyDb, address: string): Promise<void>;
  /**
   * A relation `(address, score)` of the listings that match, higher scores more relevant;
   * answered by the index. `query.words` holds letters and digits only.
   */
  matchingAgents(query: TextQuery): RawBuilder<{ address: string; score: number }>;
  /**
   * Runs a query joined to {@link matchingAgents} so that it looks each match up by key rather
   * than reading the whole registry: a word matches few listings, which no estimate knows. The
   * query joins in the order it is written, the matches first: planning a search's dozen
   * joins every way took PostgreSQL several times as long as running the one it chose.
   */
  withFewMatches<T>(db: Kysely<Database>, work: (db: Kysely<Database>) => Promise<T>): Promise<T>;
}

const sqliteSearch: FullTextSearch = {
  // FTS5 keys its rows by integer; agent_search_keys gives each address a stable one.
  async createAgentSearch(db) {
    await sql`create table agent_search_keys (id integer primary key, address text not null unique)`.execute(
      db,
    );
    await sql`create virtual table agent_search using fts5(name, handle, description, readme, tokenize = 'unicode61 remove_diacritics 2')`.execute(
      db,
    );
  },

  async dropAgentSearch(db) {
    await sql`drop table agent_search`.execute(db);
    await sql`drop table agent_search_keys`.execute(db);
  },

  async indexAgentTexts(db, texts) {
    if (texts.length === 0) return;
    const addresses = sql.join(texts.map((text) => text.address));
    await sql`insert into agent_search_keys (address)
      values ${sql.join(texts.map((text) => sql`(${text.address})`))}
      on conflict (address) do nothing`.execute(db);
    await sql`delete from agent_search where rowid in
      (select id from agent_search_keys where address in (${addresses}))`.execute(db);
    const rows = sql.join(
      texts.map((t) => sql`(${t.address}, ${t.name}, ${t.handle}, ${t.description}, ${t.readme})`),
    );
    await sql`insert into agent_search (rowid, name, handle, description, readme)
      select k.id, v.column2, v.column3, v.column4, v.column5
      from (values ${rows}) as v join agent_search_keys k on k.address = v.column1`.execute(db);
  },

  async removeAgentText(db, address) {
    await sql`delete from agent_search where rowid = (select id from agent_search_keys where address = ${address})`.execute(
      db,
    );
    await sql`delete from agent_search_keys where address = ${address}`.execute(db);
  },

  // SQLite's planner already starts from the full-text match and looks each listing up.
  withFewMatches: (db, work) => work(db),

  // bm25 is lower for better matches; names and handles weigh most, readmes least.
  matchingAgents({ words, exact }) {
    const terms = words.map((word) => (exact ? `"${word}"` : `"${word}"*`));
    const match = terms.join(exact ? ' AND ' : ' OR ');
    return sql<{ address: string; score: number }>`(
      select k.address as address, -bm25(agent_search, 10.0, 10.0, 4.0, 1.0) as score
      from agent_search join agent_search_keys k on k.id = agent_search.rowid
      where agent_search match ${match})`;
  },
};

const postgresSearch: FullTextSearch = {
  // One tsvector per listing, weighted by field, under a GIN index. The 'simple'
  // configuration keeps words as written (lower-cased): names are not English prose.
  // Parallel workers cost ten times a search to start: the table never gets any.
  async createAgentSearch(db) {
    await sql`create table agent_search (
      address text primary key references agents (address) on delete cascade,
      document tsvector not null) with (parallel_workers = 0)`.execute(db);
    await sql`create index agent_search_document on agent_search using gin (document)`.execute(db);
  },

  async dropAgentSearch(db) {
    await sql`drop table agent_search`.execute(db);
  },

  async indexAgentTexts(db, texts) {
    if (texts.length === 0) return;
    const rows = sql.join(
      texts.map((t) => sql`(${t.address}, ${t.name}, ${t.handle}, ${t.description}, ${t.readme})`),
    );
    await sql`insert into agent_search (address, document)
      select v.address,
        setweight(to_tsvector('simple', v.name), 'A') ||
        setweight(to_tsvector('simple', v.handle), 'A') ||
        setweight(to_tsvector('simple', v.description), 'B') ||
        setweight(to_tsvector('simple', v.readme), 'D')
      from (values ${rows}) as v (address, name, handle, description, readme)
      on conflict (address) do update set document = excluded.document`.execute(db);
  },

  async removeAgentText(db, address) {
    await sql`delete from agent_search where address = ${address}`.execute(db);
  },

  // The planner guesses that a tsquery matches thousands of rows (it keeps no statistics of
  // rare words) and would hash the whole registry; looking matches up one by one is what a
  // search of a few words needs, and still linear for a word every listing has.
  withFewMatches: (db, work) =>
    atomically(db, async (trx) => {
      await sql`select set_config('enable_hashjoin', 'off', true),
        set_config('enable_mergejoin', 'off', true),
        set_config('max_parallel_workers_per_gather', '0', true),
        set_config('join_collapse_limit', '1', true),
        set_config('from_collapse_limit', '1', true)`.execute(trx);
      return work(trx);
    }),

  matchingAgents({ words, exact }) {
    const query = words.map((word) => (exact ? word : `${word}:*`)).join(exact ? ' & ' : ' | ');
    return sql<{ address: string; score: number }>`(
      select s.address as address, ts_rank(s.document, q.query) as score
      from agent_search s, to_tsquery('simple', ${query}) as q(query)
      where s.document @@ q.query)`;
  },
};

/** The full-text search of a database. */
export function fullTextSearch(dialect: DialectName): FullTextSearch {
  return dialect === 'sqlite' ? sqliteSearch : postgresSearch;
}
