import { sql, type Kysely, type Selectable } from 'kysely';
import type { Database, MailboxesTable } from '../schema.js';

export type MailboxRow = Selectable<MailboxesTable>;

/**
 * A registered agent's mailbox and its counters. The counters move in the same transaction
 * as the messages they count, so they never drift from the messages table.
 */
export class MailboxesRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async create(mailbox: Pick<MailboxRow, 'address' | 'user_id' | 'created_at'>): Promise<void> {
    await this.db
      .insertInto('mailboxes')
      .values({ ...mailbox, pending_messages: 0, bytes_stored: 0 })
      .onConflict((oc) => oc.column('address').doNothing())
      .execute();
  }

  find(address: string): Promise<MailboxRow | undefined> {
    return this.db
      .selectFrom('mailboxes')
      .selectAll()
      .where('address', '=', address)
      .executeTakeFirst();
  }

  /** Removes the mailbox and, by cascade, every message in it. */
  async delete(address: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('mailboxes')
      .where('address', '=', address)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  /** Bytes held in all of a user's mailboxes (the storage quota's measure). */
  async bytesStoredBy(userId: string): Promise<number> {
    const row = await this.db
      .selectFrom('mailboxes')
      .select((eb) => eb.fn.coalesce(eb.fn.sum<number>('bytes_stored'), sql<number>`0`).as('bytes'))
      .where('user_id', '=', userId)
      .executeTakeFirstOrThrow();
    return Number(row.bytes);
  }

  /** Adds (or, with negative numbers, removes) messages to the counters. */
  async count(address: string, messages: number, bytes: number): Promise<void> {
    await this.db
      .updateTable('mailboxes')
      .set({
        pending_messages: sql`pending_messages + ${messages}`,
        bytes_stored: sql`bytes_stored + ${bytes}`,
      })
      .where('address', '=', address)
      .execute();
  }
}
