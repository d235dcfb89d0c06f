import { Type, type Static } from '@sinclair/typebox';
import type { UserUsage } from '../services/usage.js';
import { isoTimestamp } from './common.js';

export const UsageReport = Type.Object({
  bytes_transferred: Type.Integer(),
  bytes_transferred_limit: Type.Integer(),
  num_messages: Type.Integer(),
  num_messages_limit: Type.Integer(),
  bytes_stored: Type.Integer(),
  bytes_stored_limit: Type.Integer(),
  num_agents: Type.Integer(),
  num_agents_limit: Type.Integer(),
  expiry: Type.String({
    format: 'date-time',
    description: 'End of the current period: the start of next month, UTC',
  }),
});
export type UsageReport = Static<typeof UsageReport>;

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
