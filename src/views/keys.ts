import type { ApiKeyInfo, NewKey } from '../services/keys.js';
import { isoTimestamp } from '../wire/common.js';
import type { ApiKey, NewApiKey } from '../wire/keys.js';

function isoTimestampOrNull(ms: number | null): string | null {
  return ms === null ? null : isoTimestamp(ms);
}

/** A key in its owner's list: never its secret; `current` when it is the one making the call. */
export function apiKeyView(key: ApiKeyInfo, currentKeyId: string): ApiKey {
  return {
    id: key.id,
    label: key.label,
    created_at: isoTimestamp(key.createdAt),
    expires_at: isoTimestampOrNull(key.expiresAt),
    read_only: key.readOnly,
    addresses: key.addresses,
    revoked_at: isoTimestampOrNull(key.revokedAt),
    current: key.id === currentKeyId,
  };
}

/** A key just made, with the key itself: the one time it is shown. */
export function newApiKeyView(key: NewKey): NewApiKey {
  return {
    id: key.id,
    label: key.label,
    created_at: isoTimestamp(key.createdAt),
    expires_at: isoTimestampOrNull(key.expiresAt),
    read_only: key.readOnly,
    addresses: key.addresses,
    key: key.token,
  };
}
