import type { UserUsage } from '../services/usage.js';
import { isoTimestamp } from '../wire/common.js';
import type { UsageReport } from '../wire/usage.js';

/** This period's counters and current totals of a user, each beside its limit. */
export function usageReport({ limits, counters, totals, periodEnd }: UserUsage): UsageReport {
  return {
    bytes_transferred: counters.bytes_transferred,
    bytes_transferred_limit: limits.bytesTransferredPerMonth,
    num_messages: counters.num_messages,
    num_messages_limit: limits.messagesPerMonth,
    bytes_stored: totals.bytes_stored,
    bytes_stored_limit: limits.bytesStored,
    num_agents: totals.num_agents,
    num_agents_limit: limits.agents,
    expiry: isoTimestamp(periodEnd),
  };
}
