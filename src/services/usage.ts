import type { Quotas } from '../config/index.js';
import type { Repositories, Store } from '../store/index.js';
import { isoTimestamp } from '../time.js';
import type { QuotaOverrides } from '../store/repositories/usage.js';
import type { Clock } from './clock.js';

export interface UsageReport {
  bytes_transferred: number;
  bytes_transferred_limit: number;
  num_messages: number;
  num_messages_limit: number;
  bytes_stored: number;
  bytes_stored_limit: number;
  num_agents: number;
  num_agents_limit: number;
  /** End of the current usage period (start of next month, UTC), ISO-8601. */
  expiry: string;
}

/** The calendar month (UTC) a moment falls in, as `YYYY-MM`. */
export function usagePeriod(ms: number): string {
  return new Date(ms).toISOString().slice(0, 7);
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
    private readonly defaults: Quotas,
  ) {}

  currentPeriod(): string {
    return usagePeriod(this.clock.now());
  }

  /** Effective limits of a user: overrides where set, else the configured defaults. */
  async limitsFor(userId: string, repos: Repositories = this.store.repos): Promise<Quotas> {
    return this.limitsWith(await repos.usage.findOverrides(userId));
  }

  /** The limits a user's overrides (read by the caller, perhaps in a larger query) make. */
  limitsWith(o: QuotaOverrides | undefined): Quotas {
    return {
      agents: o?.agents ?? this.defaults.agents,
      messagesPerMonth: o?.messages_per_month ?? this.defaults.messagesPerMonth,
      bytesStored: o?.bytes_stored ?? this.defaults.bytesStored,
      bytesTransferredPerMonth:
        o?.bytes_transferred_per_month ?? this.defaults.bytesTransferredPerMonth,
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

  async report(userId: string): Promise<UsageReport> {
    const now = this.clock.now();
    const repos = this.store.repos;
    const [limits, period, totals] = await Promise.all([
      this.limitsFor(userId),
      repos.usage.period(userId, usagePeriod(now)),
      repos.usage.totals(userId),
    ]);
    return {
      bytes_transferred: period.bytes_transferred,
      bytes_transferred_limit: limits.bytesTransferredPerMonth,
      num_messages: period.num_messages,
      num_messages_limit: limits.messagesPerMonth,
      bytes_stored: totals.bytes_stored,
      bytes_stored_limit: limits.bytesStored,
      num_agents: totals.num_agents,
      num_agents_limit: limits.agents,
      expiry: isoTimestamp(periodEnd(now)),
    };
  }
}
