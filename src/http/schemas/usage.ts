import { Type } from '@sinclair/typebox';

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
