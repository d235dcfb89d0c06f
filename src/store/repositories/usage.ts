import { sql, type Kysely, type Selectable } from 'kysely';
import type { CompiledStatements } from '../compiled.js';
import type { Database, UserQuotasTable } from '../schema.js';

export type QuotaOverridesRow = Selectable<UserQuotasTable>;
export type QuotaOverrides = Omit<QuotaOverridesRow, 'user_id'>;

export interface PeriodCounters {
  num_messages: number;
  bytes_transferred: number;
}

export interface StoredTotals {
  num_agents: number;
  bytes_stored: number;
}

/**
 * Adds to a user's counters of `day` (UTC, `YYYY-MM-DD`) and of its month (the period the
 * quotas count), creating the rows on first use: the month's row first, as every writer of
 * usage counts takes them, so that two writers never wait on each other.
 */
export async function addUsage(
  db: Kysely<Database>,
  statements: CompiledStatements,
  userId: string,
  day: string,
  delta: Partial<PeriodCounters>,
): Promise<void> {
  const messages = delta.num_messages ?? 0;
  const bytes = delta.bytes_transferred ?? 0;
  const counts = { user_id: userId, num_messages: messages, bytes_transferred: bytes };
  const period = day.slice(0, 7);
  await statements.execute(
    db,
    'usage_periods.add',
    [userId, messages, bytes, period, messages, bytes],
    () =>
      db
        .insertInto('usage_periods')
        .values({ ...counts, period })
        .onConflict((oc) =>
          oc.columns(['user_id', 'period']).doUpdateSet({
            num_messages: sql`usage_periods.num_messages + ${messages}`,
            bytes_transferred: sql`usage_periods.bytes_transferred + ${bytes}`,
          }),
        )
        .compile(),
  );
  await statements.execute(
    db,
    'usage_days.add',
    [userId, messages, bytes, day, messages, bytes],
    () =>
      db
        .insertInto('usage_days')
        .values({ ...counts, day })
        .onConflict((oc) =>
          oc.columns(['user_id', 'day']).doUpdateSet({
            num_messages: sql`usage_days.num_messages + ${messages}`,
            bytes_transferred: sql`usage_days.bytes_transferred + ${bytes}`,
          }),
        )
        .compile(),
  );
}

/**
 * Quota overrides and current totals of a user, and the monthly counters, which the mailbox
 * moves with the messages they count.
 */
export class UsageRepository {
  constructor(private readonly db: Kysely<Database>) {}

  findOverrides(userId: string): Promise<QuotaOverridesRow | undefined> {
    return this.db
      .selectFrom('user_quotas')
      .selectAll()
      .where('user_id', '=', userId)
      .executeTakeFirst();
  }

  /** Sets the given overrides (null restores the default) and keeps the others. */
  async setOverrides(userId: string, changes: Partial<QuotaOverrides>): Promise<void> {
    const empty: QuotaOverrides = {
      agents: null,
      messages_per_month: null,
      bytes_stored: null,
      bytes_transferred_per_month: null,
    };
    await this.db
      .insertInto('user_quotas')
      .values({ user_id: userId, ...empty, ...changes })
      .onConflict((oc) => oc.column('user_id').doUpdateSet(changes))
      .execute();
  }

  /**
   * Counts one message of the user's in the period (chat messages, docs/chat.md) when it stays
   * within their monthly limit (their override, else `defaultLimit`), in one statement, and then
   * in its `day` (UTC, `YYYY-MM-DD`); answers false, counting nothing, when it would not.
   */
  async chargeMessage(userId: string, day: string, defaultLimit: number): Promise<boolean> {
    const limit = sql<number>`coalesce((select q.messages_per_month from user_quotas q where q.user_id = ${userId}), ${defaultLimit})`;
    const { rows } = await sql<{ num_messages: number }>`
      insert into usage_periods (user_id, period, num_messages, bytes_transferred)
      select ${userId}, ${day.slice(0, 7)}, 1, 0 where ${limit} >= 1
      on conflict (user_id, period) do update
        set num_messages = usage_periods.num_messages + 1
        where usage_periods.num_messages + 1 <= ${limit}
      returning num_messages`.execute(this.db);
    if (rows.length === 0) return false;
    await this.db
      .insertInto('usage_days')
      .values({ user_id: userId, day, num_messages: 1, bytes_transferred: 0 })
      .onConflict((oc) =>
        oc
          .columns(['user_id', 'day'])
          .doUpdateSet({ num_messages: sql`usage_days.num_messages + 1` }),
      )
      .execute();
    return true;
  }

  /** The user's counters of the last `months` periods that have any, most recent first. */
  history(userId: string, months: number): Promise<(PeriodCounters & { period: string })[]> {
    return this.db
      .selectFrom('usage_periods')
      .select(['period', 'num_messages', 'bytes_transferred'])
      .where('user_id', '=', userId)
      .orderBy('period', 'desc')
      .limit(months)
      .execute();
  }

  /** The user's counters of the last `days` days that have any, most recent first. */
  days(userId: string, days: number): Promise<(PeriodCounters & { period: string })[]> {
    return this.db
      .selectFrom('usage_days')
      .select(['day as period', 'num_messages', 'bytes_transferred'])
      .where('user_id', '=', userId)
      .orderBy('day', 'desc')
      .limit(days)
      .execute();
  }

  async period(userId: string, period: string): Promise<PeriodCounters> {
    const row = await this.db
      .selectFrom('usage_periods')
      .select(['num_messages', 'bytes_transferred'])
      .where('user_id', '=', userId)
      .where('period', '=', period)
      .executeTakeFirst();
    return row ?? { num_messages: 0, bytes_transferred: 0 };
  }

  /**
   * Agents registered and bytes held in mailboxes right now: the stored bytes are the number
   * the storage quota is checked against.
   */
  async totals(userId: string): Promise<StoredTotals> {
    const row = await this.db
      .selectFrom('users')
      .leftJoin('user_storage', 'user_storage.user_id', 'users.id')
      .select((eb) => [
        eb
          .selectFrom('agents')
          .select((count) => count.fn.countAll<number>().as('n'))
          .where('agents.user_id', '=', userId)
          .as('num_agents'),
        eb.fn.coalesce('user_storage.bytes_stored', sql<number>`0`).as('bytes_stored'),
      ])
      .where('users.id', '=', userId)
      .executeTakeFirst();
    return {
      num_agents: Number(row?.num_agents ?? 0),
      bytes_stored: Number(row?.bytes_stored ?? 0),
    };
  }
}
