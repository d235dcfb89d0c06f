import type { UserRow } from '../store/repositories/users.js';
import { isoTimestamp } from '../wire/common.js';
import type { SessionInfo } from '../wire/sessions.js';

/** Who is signed in, and when the session ends; undefined for a call made with an API key. */
export function sessionInfo(user: UserRow, expiresAt: number | undefined): SessionInfo {
  return {
    user: { id: user.id, name: user.name },
    expires_at: expiresAt === undefined ? null : isoTimestamp(expiresAt),
  };
}
