import { sql, type Kysely, type Selectable } from 'kysely';
import type { Database, MailboxesTable } from '../schema.js';
import type { PeriodCounters, QuotaOverrides } from './usage.js';

export type MailboxRow = Selectable<MailboxesTable>;

/** A mailbox with what its owner's quotas are measured against, read in one statement. */
export interface MailboxWithOwnerUsage {
  mailbox: MailboxRow;
  /** The owner's quota overrides; all null when the defaults apply. */
  overrides: QuotaOverrides;
  /** The owner's counters in the requested period. */
  counters: PeriodCounters;
  /** Bytes held in all of the owner's mailboxes. */
  ownerBytesStored: number;
}

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

  /**
   * The mailbox and its owner's usage in `period`, quota overrides and stored bytes: what
   * every delivery and read checks, in one round trip instead of four.
   */
  async findWithOwnerUsage(
    address: string,
    period: string,
  ): Promise<MailboxWithOwnerUsage | undefined> {
    const row = await this.db
      .selectFrom('mailboxes as m')
      .leftJoin('usage_periods as u', (join) =>
        join.onRef('u.user_id', '=', 'm.user_id').on('u.period', '=', period),
      )
      .leftJoin('user_quotas as q', 'q.user_id', 'm.user_id')
      .selectAll('m')
      .select((eb) => [
        'u.num_messages',
        'u.bytes_transferred',
        'q.agents as quota_agents',
        'q.messages_per_month as quota_messages_per_month',
        'q.bytes_stored as quota_bytes_stored',
        'q.bytes_transferred_per_month as quota_bytes_transferred_per_month',
        eb
          .selectFrom('mailboxes as owned')
          .select((sub) => sub.fn.sum<number>('owned.bytes_stored').as('total'))
          .whereRef('owned.user_id', '=', 'm.user_id')
          .as('owner_bytes_stored'),
      ])
      .where('m.address', '=', address)
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      mailbox: {
        address: row.address,
        user_id: row.user_id,
        pending_messages: Number(row.pending_messages),
        bytes_stored: Number(row.bytes_stored),
        created_at: row.created_at,
      },
      overrides: {
        agents: row.quota_agents,
        messages_per_month: row.quota_messages_per_month,
        bytes_stored: row.quota_bytes_stored,
        bytes_transferred_per_month: row.quota_bytes_transferred_per_month,
      },
      counters: {
        num_messages: Number(row.num_messages ?? 0),
        bytes_transferred: Number(row.bytes_transferred ?? 0),
      },
      ownerBytesStored: Number(row.owner_bytes_stored ?? 0),
    };
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
