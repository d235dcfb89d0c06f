import type { Kysely, Selectable } from 'kysely';
import type { Database, MailboxesTable } from '../schema.js';

export type NewMailbox = Pick<Selectable<MailboxesTable>, 'address' | 'user_id' | 'created_at'>;

/** One mailbox per registered agent, with counters of what it holds. */
export class MailboxesRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Creates an empty mailbox; an existing one is kept with its counters. */
  async create(mailbox: NewMailbox): Promise<void> {
    await this.db
      .insertInto('mailboxes')
      .values({ ...mailbox, pending_messages: 0, bytes_stored: 0 })
      .onConflict((oc) => oc.column('address').doNothing())
      .execute();
  }

  async delete(address: string): Promise<void> {
    await this.db.deleteFrom('mailboxes').where('address', '=', address).execute();
  }
}
