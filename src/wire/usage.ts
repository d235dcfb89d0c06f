import { Type, type Static } from '@sinclair/typebox';

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

export const UsagePeriod = Type.Object({
  period: Type.String({
    description: 'Calendar month in UTC, YYYY-MM; with `by=day`, calendar day in UTC, YYYY-MM-DD',
  }),
  num_messages: Type.Integer(),
  bytes_transferred: Type.Integer(),
});
export type UsagePeriod = Static<typeof UsagePeriod>;

export const UsageHistory = Type.Array(UsagePeriod);

export const UsageHistoryQuery = Type.Object({
  by: Type.Optional(
    Type.Union([Type.Literal('month'), Type.Literal('day')], {
      default: 'month',
      description: 'Counters per calendar month, or per day (UTC)',
    }),
  ),
  months: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 120, default: 12, description: 'With `by=month`' }),
  ),
  days: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 366, default: 30, description: 'With `by=day`' }),
  ),
});
