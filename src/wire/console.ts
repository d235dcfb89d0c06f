import { Type, type Static } from '@sinclair/typebox';
import type { ApiKeyInfo } from '../services/users.js';
import { isoTimestamp, Nullable, Timestamp } from './common.js';

export const SignInRequest = Type.Object({
  api_key: Type.String({ minLength: 1, maxLength: 200, description: 'An API key of the user' }),
});

export const SessionInfo = Type.Object({
  user: Type.Object({ id: Type.String(), name: Type.String() }),
  expires_at: Nullable(
    Type.String({
      format: 'date-time',
      description: 'End of the session; null when the call was made with an API key',
    }),
  ),
});
export type SessionInfo = Static<typeof SessionInfo>;

/** What every answer about an API key says of it. */
const apiKeyFields = {
  id: Type.String(),
  label: Nullable(Type.String()),
  created_at: Timestamp,
  expires_at: Nullable(Timestamp),
};

export const ApiKey = Type.Object({
  ...apiKeyFields,
  revoked_at: Nullable(Timestamp),
  current: Type.Boolean({ description: 'True for the key (or session key) making this call' }),
});
export type ApiKey = Static<typeof ApiKey>;

export const NewApiKey = Type.Object({
  ...apiKeyFields,
  key: Type.String({ description: 'The API key; it is shown this once only' }),
});
export type NewApiKey = Static<typeof NewApiKey>;

/** The longest lifetime a key made over HTTP may be given: ten years. */
const MAX_LIFETIME_SECONDS = 10 * 366 * 24 * 3600;

export const CreateApiKeyRequest = Type.Object({
  label: Type.Optional(Nullable(Type.String({ maxLength: 100 }))),
  expires_in_seconds: Type.Optional(
    Nullable(
      Type.Integer({
        minimum: 60,
        maximum: MAX_LIFETIME_SECONDS,
        description: 'Lifetime of the key; null or absent for a key that does not expire',
      }),
    ),
  ),
});

export const KeyParams = Type.Object({
  id: Type.String({ pattern: '^[a-z2-7]{12}$', description: 'The id of an API key' }),
});

export const UsagePeriod = Type.Object({
  period: Type.String({ description: 'Calendar month in UTC, YYYY-MM' }),
  num_messages: Type.Integer(),
  bytes_transferred: Type.Integer(),
});
export type UsagePeriod = Static<typeof UsagePeriod>;

export const UsageHistory = Type.Array(UsagePeriod);

export const UsageHistoryQuery = Type.Object({
  months: Type.Optional(Type.Integer({ minimum: 1, maximum: 120, default: 12 })),
});

export function apiKeyView(key: ApiKeyInfo, currentKeyId: string): ApiKey {
  return {
    id: key.id,
    label: key.label,
    created_at: isoTimestamp(key.createdAt),
    expires_at: key.expiresAt === null ? null : isoTimestamp(key.expiresAt),
    revoked_at: key.revokedAt === null ? null : isoTimestamp(key.revokedAt),
    current: key.id === currentKeyId,
  };
}
