import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../crypto/index.js';
import type { UserPrincipal } from '../auth/principal.js';
import { ForbiddenError, UnauthenticatedError } from '../errors.js';
import type { ChangeFeed } from '../infra/change-feed.js';
import type { Clock } from '../infra/clock.js';
import type { Store } from '../store/index.js';
import type { SessionWithKey } from '../store/repositories/sessions.js';
import type { UserRow } from '../store/repositories/users.js';
import type { KeysService } from './keys.js';
import type { UsersService } from './users.js';

export interface OpenedSession {
  /** The secret the browser keeps in its cookie; only its hash is stored. */
  token: string;
  user: UserRow;
  expiresAt: number;
}

function hashToken(token: string): string {
  return sha256Hex(token);
}

const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/**
 * Web console sessions. Signing in presents an API key once; the browser then holds a random
 * session token instead. A session ends at its own expiry, at sign-out, or as soon as the key
 * it was opened with is revoked or expires.
 */
export class SessionsService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly keys: KeysService,
    private readonly users: UsersService,
    private readonly ttlMs: number,
    private readonly feed: ChangeFeed,
  ) {}

  async signIn(apiKey: string): Promise<OpenedSession> {
    const principal = await this.keys.authenticate(apiKey);
    if (principal.scope) {
      throw new ForbiddenError(
        'A scoped API key (read-only or limited to agents) cannot open a console session: sign in with a key without limits',
      );
    }
    const key = await this.store.repos.apiKeys.findById(principal.keyId);
    const user = await this.users.findUser(principal.userId);
    const now = this.clock.now();
    let expiresAt = now + this.ttlMs;
    if (key?.expires_at != null) expiresAt = Math.min(expiresAt, key.expires_at);
    const token = randomBytes(32).toString('base64url');
    await this.store.repos.sessions.insert({
      token_hash: hashToken(token),
      user_id: principal.userId,
      key_id: principal.keyId,
      created_at: now,
      expires_at: expiresAt,
    });
    return { token, user, expiresAt };
  }

  /** The user behind a session token, or 401 saying why there is none. */
  async authenticate(token: string): Promise<UserPrincipal> {
    const sessionId = TOKEN_PATTERN.test(token) ? hashToken(token) : undefined;
    const row = sessionId && (await this.store.repos.sessions.find(sessionId));
    const refusal = row ? await this.refusal(row) : 'Not signed in, or the session has expired';
    if (!row || refusal !== undefined) throw new UnauthenticatedError(refusal);
    return {
      kind: 'user',
      userId: row.user_id,
      keyId: row.key_id,
      sessionId: row.token_hash,
      sessionExpiresAt: row.expires_at,
      ...(row.key_expires_at !== null && { keyExpiresAt: row.key_expires_at }),
      ...(row.key_made_by !== null && { member: row.key_made_by }),
    };
  }

  /** Why the session of this id (its token's hash) no longer works; undefined while it does. */
  async standing(sessionId: string): Promise<string | undefined> {
    const row = await this.store.repos.sessions.find(sessionId);
    return row ? this.refusal(row) : 'Signed out, or the session has expired';
  }

  private async refusal(row: SessionWithKey): Promise<string | undefined> {
    if (row.expires_at <= this.clock.now()) return 'Not signed in, or the session has expired';
    const key = await this.keys.refusal({
      user_id: row.user_id,
      revoked_at: row.key_revoked_at,
      expires_at: row.key_expires_at,
      made_by: row.key_made_by,
    });
    // The keys service says "API key has …": here it is the session's key.
    return key?.replace(/^API key /, 'The API key of this session ');
  }

  /** Removes sessions past their expiry (a housekeeping task). */
  purgeExpired(): Promise<number> {
    return this.store.repos.sessions.deleteExpired(this.clock.now());
  }

  async signOut(token: string): Promise<void> {
    if (!TOKEN_PATTERN.test(token)) return;
    const sessionId = hashToken(token);
    await this.store.repos.sessions.delete(sessionId);
    void this.feed.publish([{ kind: 'session.ended', sessionId }]);
  }
}
