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

/** Messages and bytes added to (or, negative, removed from) one mailbox's counters. */
export interface CounterChange {
  address: string;
  messages: number;
  bytes: number;
}

/** How adding (`sign` 1) or removing (-1) `messages` moves each mailbox's counters. */
export function counterChanges(
  messages: { address: string; size: number }[],
  sign: 1 | -1,
): CounterChange[] {
  const changes = new Map<string, CounterChange>();
  for (const { address, size } of messages) {
    const change = changes.get(address) ?? { address, messages: 0, bytes: 0 };
    change.messages += sign;
    change.bytes += sign * size;
    changes.set(address, change);
  }
  return [...changes.values()];
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

  /**
   * Removes the mailbox and, by cascade, every message in it, and takes its bytes off its
   * owner's total. Run it in a transaction.
   */
  async delete(address: string): Promise<boolean> {
    const removed = await this.db
      .deleteFrom('mailboxes')
      .where('address', '=', address)
      .returning(['user_id', 'bytes_stored'])
      .executeTakeFirst();
    if (!removed) return false;
    await this.addToOwners(new Map([[removed.user_id, -Number(removed.bytes_stored)]]));
    return true;
  }

  /**
   * The mailbox and its owner's usage in `period`, stored bytes and quota overrides: what
   * every delivery and read checks, in one round trip instead of four.
   */
  async findWithOwnerUsage(
    address: string,
    period: string,
  ): Promise<MailboxWithOwnerUsage | undefined> {
    return (await this.findManyWithOwnerUsage([address], period)).get(address);
  }

  /** {@link findWithOwnerUsage} for several mailboxes at once, by address; missing ones are left out. */
  async findManyWithOwnerUsage(
    addresses: string[],
    period: string,
  ): Promise<Map<string, MailboxWithOwnerUsage>> {
    const rows = await this.db
      .selectFrom('mailboxes as m')
      .leftJoin('usage_periods as u', (join) =>
        join.onRef('u.user_id', '=', 'm.user_id').on('u.period', '=', period),
      )
      .leftJoin('user_quotas as q', 'q.user_id', 'm.user_id')
      .leftJoin('user_storage as s', 's.user_id', 'm.user_id')
      .selectAll('m')
      .select([
        'u.num_messages',
        'u.bytes_transferred',
        's.bytes_stored as owner_bytes_stored',
        'q.agents as quota_agents',
        'q.messages_per_month as quota_messages_per_month',
        'q.bytes_stored as quota_bytes_stored',
        'q.bytes_transferred_per_month as quota_bytes_transferred_per_month',
      ])
      .where((eb) =>
        addresses.length === 1
          ? eb('m.address', '=', addresses[0]!)
          : eb('m.address', 'in', addresses),
      )
      .execute();
    return new Map(
      rows.map((row) => [
        row.address,
        {
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
        },
      ]),
    );
  }

  /** Adds (or, with negative numbers, removes) messages to the counters. */
  async count(address: string, messages: number, bytes: number): Promise<void> {
    await this.countMany([{ address, messages, bytes }]);
  }

  /**
   * {@link count} for several mailboxes, and their owners' totals by the same bytes; says
   * whose mailboxes moved (those that exist), so that the caller can charge their owners.
   * Run it in a transaction.
   */
  async countMany(changes: CounterChange[]): Promise<Pick<MailboxRow, 'address' | 'user_id'>[]> {
    if (changes.length === 0) return [];
    // A VALUES list names its columns column1, column2… on both SQLite and PostgreSQL; the
    // casts tell PostgreSQL what the parameters are.
    const values = changes.map(
      ({ address, messages, bytes }) =>
        sql`(${address}, cast(${messages} as bigint), cast(${bytes} as bigint))`,
    );
    const moved = await this.db
      .updateTable('mailboxes')
      .from(
        sql<{ column1: string; column2: number; column3: number }>`(values ${sql.join(values)})`.as(
          'change',
        ),
      )
      .set({
        pending_messages: sql`mailboxes.pending_messages + change.column2`,
        bytes_stored: sql`mailboxes.bytes_stored + change.column3`,
      })
      .whereRef('mailboxes.address', '=', 'change.column1')
      .returning(['mailboxes.address', 'mailboxes.user_id'])
      .execute();
    const bytesOf = new Map(changes.map((change) => [change.address, change.bytes]));
    const perOwner = new Map<string, number>();
    for (const { address, user_id } of moved) {
      perOwner.set(user_id, (perOwner.get(user_id) ?? 0) + bytesOf.get(address)!);
    }
    await this.addToOwners(perOwner);
    return moved;
  }

  /** Moves owners' totals of stored bytes (user id → bytes, negative to take off). */
  private async addToOwners(bytesByOwner: Map<string, number>): Promise<void> {
    const changes = [...bytesByOwner].filter(([, bytes]) => bytes !== 0);
    if (changes.length === 0) return;
    await this.db
      .insertInto('user_storage')
      .values(changes.map(([user_id, bytes_stored]) => ({ user_id, bytes_stored })))
      .onConflict((oc) =>
        oc.column('user_id').doUpdateSet({
          bytes_stored: sql`user_storage.bytes_stored + excluded.bytes_stored`,
        }),
      )
      .execute();
  }
}
