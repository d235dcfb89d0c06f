import {
  PostgresAdapter,
  sql,
  type CreateTableBuilder,
  type Kysely,
  type RawBuilder,
} from 'kysely';
import {
  atomically,
  insertMessages,
  MAX_ROWS_PER_INSERT,
  moveCounters,
  type NewMessage,
} from './repositories/mailbox.js';
import { insertDeliveryEvents, type NewDeliveryEvent } from './repositories/deliveries.js';
import { addUsage } from './repositories/usage.js';
import type { Database } from './schema.js';

export type DialectName = 'sqlite' | 'postgres';

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
 * Everything the store does differently on SQLite and PostgreSQL, in one place, with both
 * implementations side by side. Repositories and migrations are handed the dialect object and
 * never branch on a dialect's name.
 */
export interface Dialect {
  readonly name: DialectName;
  /**
   * Inside a transaction, makes other transactions that lock the same user wait until this
   * one ends, so a rule over everything a user owns (a quota) sees no concurrent change.
   */
  lockUser(db: Kysely<Database>, userId: string): Promise<void>;
  /** The mailbox aggregate's group insert: see {@link MailboxRepository.deliver}. */
  deliver(
    db: Kysely<Database>,
    messages: NewMessage[],
    period: string,
    trace?: NewDeliveryEvent[],
  ): Promise<Set<string>>;
  /** Adds bytes served to a user's transfer count of `period`. */
  countTransfer(db: Kysely<Database>, userId: string, period: string, bytes: number): Promise<void>;
  /** The schema Kysely keeps its migration bookkeeping in, where the dialect has schemas. */
  migrationSchema(db: Kysely<Database>): Promise<string | undefined>;
  /** Adds an integer primary key the database assigns in ascending order. */
  addIdentityColumn<TB extends string, C extends string, CN extends string>(
    table: CreateTableBuilder<TB, C>,
    name: CN,
  ): CreateTableBuilder<TB, C | CN>;
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
   * than reading the whole registry: a word matches few listings, which no estimate knows.
   */
  withFewMatches<T>(db: Kysely<Database>, work: (db: Kysely<Database>) => Promise<T>): Promise<T>;
}

export const sqliteDialect: Dialect = {
  name: 'sqlite',

  // SQLite's transactions take the database's write lock when they begin (see database.ts):
  // two of them never overlap, whoever they concern.
  lockUser: async () => {},

  deliver: (db, messages, period, trace) =>
    atomically(db, async (tx) => {
      const stored = await insertMessages(tx, messages);
      const perOwner = await moveCounters(tx, stored, 1);
      for (const [owner, count] of perOwner) {
        await addUsage(tx, owner, period, { num_messages: count });
      }
      if (trace && trace.length > 0) await insertDeliveryEvents(tx, trace);
      return new Set(stored.map((message) => message.uuid));
    }),

  countTransfer: (db, userId, period, bytes) =>
    addUsage(db, userId, period, { bytes_transferred: bytes }),

  migrationSchema: async () => undefined,

  // `integer primary key` is the rowid itself, assigned in ascending order.
  addIdentityColumn: (table, name) => table.addColumn(name, 'integer', (c) => c.primaryKey()),

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

export const postgresDialect: Dialect = {
  name: 'postgres',

  async lockUser(db, userId) {
    await db.selectFrom('users').select('id').where('id', '=', userId).forUpdate().execute();
  },

  // One statement is atomic on its own and costs one round trip, where a transaction costs
  // one per statement and two more for its begin and commit. Every part sees the tables as
  // they were before the statement: `counted` hands the owners of the mailboxes it moved,
  // with what moved, to `owned` and `charged` through RETURNING.
  async deliver(db, messages, period, trace) {
    if (messages.length === 0) return new Set();
    if (messages.length > MAX_ROWS_PER_INSERT) {
      throw new RangeError(`at most ${MAX_ROWS_PER_INSERT} messages per statement`);
    }
    // A message's sender and digest are stored for the delivery trace, when it is on.
    const traced = messages.some((m) => m.sender != null || m.digest != null);
    const rows = sql.join(
      messages.map((m) =>
        traced
          ? sql`(${m.uuid}, ${m.address}, ${m.envelope}, ${m.size}, ${m.received_at}, ${m.expires_at}, ${m.sender ?? null}, ${m.digest ?? null})`
          : sql`(${m.uuid}, ${m.address}, ${m.envelope}, ${m.size}, ${m.received_at}, ${m.expires_at})`,
      ),
    );
    const columns = traced ? sql`, sender, digest` : sql``;
    const result = await sql<{ uuid: string }>`
      with stored as (
        insert into messages (uuid, address, envelope, size, received_at, expires_at${columns})
        values ${rows}
        on conflict (uuid) do nothing
        returning uuid, address, size
      ), per_mailbox as (
        select address, count(*) as messages, sum(size) as bytes from stored group by address
      ), counted as (
        update mailboxes
        set pending_messages = mailboxes.pending_messages + per_mailbox.messages,
            bytes_stored = mailboxes.bytes_stored + per_mailbox.bytes
        from per_mailbox
        where mailboxes.address = per_mailbox.address
        returning mailboxes.user_id, per_mailbox.messages, per_mailbox.bytes
      ), owned as (
        insert into user_storage (user_id, bytes_stored)
        select user_id, sum(bytes) from counted group by user_id
        on conflict (user_id)
        do update set bytes_stored = user_storage.bytes_stored + excluded.bytes_stored
      ), charged as (
        insert into usage_periods (user_id, period, num_messages, bytes_transferred)
        select user_id, ${period}, sum(messages), 0 from counted group by user_id
        on conflict (user_id, period)
        do update set num_messages = usage_periods.num_messages + excluded.num_messages
      )${trace && trace.length > 0 ? traceStatement(trace) : sql``}
      select uuid from stored`.execute(db);
    return new Set(result.rows.map((row) => row.uuid));
  },

  // Every read of a mailbox counts its transfer, so the commit does not wait for the log to
  // reach the disk: a crash of the database server may forget the last fraction of a second
  // of transfer counts (never a message, and never a count of another kind), and a poll is
  // spared a disk flush. set_config(…, true) lasts until the end of this statement's own
  // transaction.
  async countTransfer(db, userId, period, bytes) {
    await sql`
      insert into usage_periods (user_id, period, num_messages, bytes_transferred)
      select ${userId}, ${period}, 0, cast(${bytes} as bigint)
      from (select set_config('synchronous_commit', 'off', true)) as unflushed
      on conflict (user_id, period)
      do update set bytes_transferred = usage_periods.bytes_transferred + excluded.bytes_transferred
    `.execute(db);
  },

  // Without naming it, Kysely looks for its tables in every schema and is misled by another
  // application's.
  async migrationSchema(db) {
    const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
    return rows[0]?.schema;
  },

  addIdentityColumn: (table, name) =>
    table.addColumn(name, 'bigint', (c) => c.primaryKey().generatedByDefaultAsIdentity()),

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
  withFewMatches(db, work) {
    const run = async (trx: Kysely<Database>) => {
      await sql`select set_config('enable_hashjoin', 'off', true),
        set_config('enable_mergejoin', 'off', true),
        set_config('max_parallel_workers_per_gather', '0', true)`.execute(trx);
      return work(trx);
    };
    return db.isTransaction ? run(db) : db.transaction().execute(run);
  },

  matchingAgents({ words, exact }) {
    const query = words.map((word) => (exact ? word : `${word}:*`)).join(exact ? ' & ' : ' | ');
    return sql<{ address: string; score: number }>`(
      select s.address as address, ts_rank(s.document, q.query) as score
      from agent_search s, to_tsquery('simple', ${query}) as q(query)
      where s.document @@ q.query)`;
  },
};

export function dialectNamed(name: DialectName): Dialect {
  return name === 'sqlite' ? sqliteDialect : postgresDialect;
}

/** The dialect of a connection, for code handed a bare Kysely instance (migrations). */
export function dialectOf(db: Kysely<unknown>): Dialect {
  return db.getExecutor().adapter instanceof PostgresAdapter ? postgresDialect : sqliteDialect;
}

/** The trace rows of a group insert on PostgreSQL, as one more step of its statement. */
function traceStatement(events: NewDeliveryEvent[]): RawBuilder<unknown> {
  const rows = events.map(
    (e) =>
      sql`(${e.address}, ${e.event}, cast(${e.at} as bigint), cast(${e.uuid ?? null} as text),
        cast(${e.digest ?? null} as text), cast(${e.sender ?? null} as text),
        cast(${e.size ?? null} as bigint), cast(${e.detail ?? null} as text))`,
  );
  return sql`, traced as (
        insert into delivery_events (address, event, at, uuid, digest, sender, size, detail)
        values ${sql.join(rows)}
      )`;
}
