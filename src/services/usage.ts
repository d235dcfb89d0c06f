import type { Quotas } from '../config/index.js';
import { QuotaExceededError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import type { Repositories, Store } from '../store/index.js';
import type { PeriodCounters, QuotaOverrides, StoredTotals } from '../store/repositories/usage.js';

/** A user's usage: this period's counters and current totals, against their limits. */
export interface UserUsage {
  limits: Quotas;
  counters: PeriodCounters;
  totals: StoredTotals;
  /** When the current period ends (the start of next month, UTC), epoch milliseconds. */
  periodEnd: number;
}

/** The calendar month (UTC) a moment falls in, as `YYYY-MM`. */
export function usagePeriod(ms: number): string {
  return new Date(ms).toISOString().slice(0, 7);
}

/** The calendar day (UTC) a moment falls in, as `YYYY-MM-DD`: its month is its period. */
export function usageDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** The first instant of the month after the one `ms` falls in. */
export function periodEnd(ms: number): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/**
 * Usage and quotas: monthly counters per user, limits from configuration with per-user
 * overrides. Other services call `limitsFor` inside their transactions to enforce quotas.
 */
export class UsageService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    /** The limits of a user without overrides. */
    readonly defaultLimits: Quotas,
  ) {}

  /**
   * Counts one message of the owner's (one Agentry sends or takes for them: chat, external A2A
   * agents) against their monthly quota; 406 past it.
   */
  async chargeMessage(ownerId: string): Promise<void> {
    const day = usageDay(this.clock.now());
    const { usage } = this.store.repos;
    if (await usage.chargeMessage(ownerId, day, this.defaultLimits.messagesPerMonth)) return;
    const [limits, counters] = await Promise.all([
      this.limitsFor(ownerId),
      usage.period(ownerId, usagePeriod(this.clock.now())),
    ]);
    throw new QuotaExceededError(
      `Message quota reached ${counters.num_messages} / ${limits.messagesPerMonth}`,
    );
  }

  /** Effective limits of a user: overrides where set, else the configured defaults. */
  async limitsFor(userId: string, repos: Repositories = this.store.repos): Promise<Quotas> {
    return this.limitsWith(await repos.usage.findOverrides(userId));
  }

  /** The limits a user's overrides (read by the caller, perhaps in a larger query) make. */
  limitsWith(o: QuotaOverrides | undefined): Quotas {
    return {
      agents: o?.agents ?? this.defaultLimits.agents,
      messagesPerMonth: o?.messages_per_month ?? this.defaultLimits.messagesPerMonth,
      bytesStored: o?.bytes_stored ?? this.defaultLimits.bytesStored,
      bytesTransferredPerMonth:
        o?.bytes_transferred_per_month ?? this.defaultLimits.bytesTransferredPerMonth,
    };
  }

  async setLimits(userId: string, limits: Partial<Quotas>): Promise<Quotas> {
    const changes: Record<string, number> = {};
    if (limits.agents !== undefined) changes.agents = limits.agents;
    if (limits.messagesPerMonth !== undefined) changes.messages_per_month = limits.messagesPerMonth;
    if (limits.bytesStored !== undefined) changes.bytes_stored = limits.bytesStored;
    if (limits.bytesTransferredPerMonth !== undefined) {
      changes.bytes_transferred_per_month = limits.bytesTransferredPerMonth;
    }
    await this.store.repos.usage.setOverrides(userId, changes);
    return this.limitsFor(userId);
  }

  /** Counters of the user's last `months` active periods, most recent first. */
  history(userId: string, months: number) {
    return this.store.repos.usage.history(userId, months);
  }

  /** Counters of the user's last `days` active days (UTC), most recent first. */
  days(userId: string, days: number) {
    return this.store.repos.usage.days(userId, days);
  }

  async report(userId: string): Promise<UserUsage> {
    const now = this.clock.now();
    const repos = this.store.repos;
    const [limits, counters, totals] = await Promise.all([
      this.limitsFor(userId),
      repos.usage.period(userId, usagePeriod(now)),
      repos.usage.totals(userId),
    ]);
    return { limits, counters, totals, periodEnd: periodEnd(now) };
  }
}
