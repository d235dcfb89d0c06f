import { PostgresAdapter, sql, type CreateTableBuilder, type Kysely } from 'kysely';
import {
  atomically,
  insertMessages,
  MAX_ROWS_PER_INSERT,
  moveCounters,
  type NewMessage,
} from './repositories/mailbox.js';
import { addUsage } from './repositories/usage.js';
import type { Database } from './schema.js';

export type DialectName = 'sqlite' | 'postgres';

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
  deliver(db: Kysely<Database>, messages: NewMessage[], period: string): Promise<Set<string>>;
  /** Adds bytes served to a user's transfer count of `period`. */
  countTransfer(db: Kysely<Database>, userId: string, period: string, bytes: number): Promise<void>;
  /** The schema Kysely keeps its migration bookkeeping in, where the dialect has schemas. */
  migrationSchema(db: Kysely<Database>): Promise<string | undefined>;
  /** Adds an integer primary key the database assigns in ascending order. */
  addIdentityColumn<TB extends string, C extends string, CN extends string>(
    table: CreateTableBuilder<TB, C>,
    name: CN,
  ): CreateTableBuilder<TB, C | CN>;
}

export const sqliteDialect: Dialect = {
  name: 'sqlite',

  // SQLite's transactions take the database's write lock when they begin (see database.ts):
  // two of them never overlap, whoever they concern.
  lockUser: async () => {},

  deliver: (db, messages, period) =>
    atomically(db, async (tx) => {
      const stored = await insertMessages(tx, messages);
      const perOwner = await moveCounters(tx, stored, 1);
      for (const [owner, count] of perOwner) {
        await addUsage(tx, owner, period, { num_messages: count });
      }
      return new Set(stored.map((message) => message.uuid));
    }),

  countTransfer: (db, userId, period, bytes) =>
    addUsage(db, userId, period, { bytes_transferred: bytes }),

  migrationSchema: async () => undefined,

  // `integer primary key` is the rowid itself, assigned in ascending order.
  addIdentityColumn: (table, name) => table.addColumn(name, 'integer', (c) => c.primaryKey()),
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
  async deliver(db, messages, period) {
    if (messages.length === 0) return new Set();
    if (messages.length > MAX_ROWS_PER_INSERT) {
      throw new RangeError(`at most ${MAX_ROWS_PER_INSERT} messages per statement`);
    }
    const rows = sql.join(
      messages.map(
        (m) =>
          sql`(${m.uuid}, ${m.address}, ${m.envelope}, ${m.size}, ${m.received_at}, ${m.expires_at})`,
      ),
    );
    const result = await sql<{ uuid: string }>`
      with stored as (
        insert into messages (uuid, address, envelope, size, received_at, expires_at)
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
      )
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
};

export function dialectNamed(name: DialectName): Dialect {
  return name === 'sqlite' ? sqliteDialect : postgresDialect;
}

/** The dialect of a connection, for code handed a bare Kysely instance (migrations). */
export function dialectOf(db: Kysely<unknown>): Dialect {
  return db.getExecutor().adapter instanceof PostgresAdapter ? postgresDialect : sqliteDialect;
}
