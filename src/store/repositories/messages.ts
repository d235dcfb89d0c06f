import { sql, type Insertable, type Kysely, type Selectable } from 'kysely';
import type { Database, MessagesTable } from '../schema.js';

export type MessageRow = Selectable<MessagesTable>;
export type NewMessage = Insertable<MessagesTable>;

/** What a reader of a mailbox gets back for one message. */
export type PendingMessage = Pick<
  MessageRow,
  'uuid' | 'envelope' | 'size' | 'received_at' | 'expires_at'
>;

/** Where a removed message was and how large it was, for the mailbox counters. */
export type RemovedMessage = Pick<MessageRow, 'address' | 'size'>;

/** Rows per INSERT: 6 parameters each stays far below either database's limit. */
const MAX_ROWS_PER_INSERT = 1000;

/**
 * The statement {@link MessagesRepository.insertMany} stores messages with; `npm run bench`
 * times it for its storage ceiling.
 */
export function insertMessagesQuery(db: Kysely<Database>, messages: NewMessage[]) {
  return db
    .insertInto('messages')
    .values(messages)
    .onConflict((oc) => oc.column('uuid').doNothing())
    .returning('uuid');
}

/**
 * Messages waiting in mailboxes. Every read hides expired messages, so expiry is exact even
 * between two runs of the sweep that deletes them.
 */
export class MessagesRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Those of `uuids` that some stored message has. */
  async existing(uuids: string[]): Promise<Set<string>> {
    const rows = await this.db
      .selectFrom('messages')
      .select('uuid')
      .where('uuid', 'in', uuids)
      .execute();
    return new Set(rows.map((row) => row.uuid));
  }

  /**
   * Stores the messages, in order, except those whose uuid is taken (by a message stored
   * before or earlier in the list). Returns the uuids stored now.
   */
  async insertMany(messages: NewMessage[]): Promise<Set<string>> {
    const stored = new Set<string>();
    for (let from = 0; from < messages.length; from += MAX_ROWS_PER_INSERT) {
      const batch = messages.slice(from, from + MAX_ROWS_PER_INSERT);
      const rows = await insertMessagesQuery(this.db, batch).execute();
      for (const row of rows) stored.add(row.uuid);
    }
    return stored;
  }

  /**
   * PostgreSQL: {@link insertMany} and, in the same statement, the mailbox counters, the
   * owners' stored bytes and the owners' message usage of `period` moved by exactly the
   * messages stored. One statement is atomic on its own and costs one round trip, where a
   * transaction costs one per statement and two more for its begin and commit. Returns the
   * uuids stored now.
   */
  async insertCounted(messages: NewMessage[], period: string): Promise<Set<string>> {
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
    // Every part sees the tables as they were before the statement: `counted` hands the
    // owners of the mailboxes it moved, with what moved, to `owned` and `charged` through
    // RETURNING.
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
      select uuid from stored`.execute(this.db);
    return new Set(result.rows.map((row) => row.uuid));
  }

  /** Unexpired messages of a mailbox, oldest first. */
  listPending(
    address: string,
    now: number,
    page: { limit: number; offset: number },
  ): Promise<PendingMessage[]> {
    return this.db
      .selectFrom('messages')
      .select(['uuid', 'envelope', 'size', 'received_at', 'expires_at'])
      .where('address', '=', address)
      .where('expires_at', '>', now)
      .orderBy('id')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
  }

  findPending(address: string, uuid: string, now: number): Promise<PendingMessage | undefined> {
    return this.db
      .selectFrom('messages')
      .select(['uuid', 'envelope', 'size', 'received_at', 'expires_at'])
      .where('uuid', '=', uuid)
      .where('address', '=', address)
      .where('expires_at', '>', now)
      .executeTakeFirst();
  }

  /** Deletes one message of a mailbox; undefined when there was none (or it went first). */
  delete(address: string, uuid: string): Promise<RemovedMessage | undefined> {
    return this.db
      .deleteFrom('messages')
      .where('uuid', '=', uuid)
      .where('address', '=', address)
      .returning(['address', 'size'])
      .executeTakeFirst();
  }

  /**
   * Deletes up to `limit` expired messages and says which. RETURNING reports exactly the rows
   * this statement removed, so a message deleted concurrently by its reader is never
   * subtracted from the counters twice.
   */
  deleteExpired(now: number, limit: number): Promise<RemovedMessage[]> {
    return this.db
      .deleteFrom('messages')
      .where('id', 'in', (eb) =>
        eb.selectFrom('messages').select('id').where('expires_at', '<=', now).limit(limit),
      )
      .returning(['address', 'size'])
      .execute();
  }
}
