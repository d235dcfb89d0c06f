import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../crypto/index.js';
import type { Principal } from '../auth/principal.js';
import { ForbiddenError, UnauthenticatedError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import type { Store } from '../store/index.js';
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
  async authenticate(token: string): Promise<Extract<Principal, { kind: 'user' }>> {
    const row = TOKEN_PATTERN.test(token)
      ? await this.store.repos.sessions.find(hashToken(token))
      : undefined;
    const now = this.clock.now();
    if (!row || row.expires_at <= now) {
      throw new UnauthenticatedError('Not signed in, or the session has expired');
    }
    if (row.key_revoked_at !== null) {
      throw new UnauthenticatedError('The API key of this session has been revoked');
    }
    if (row.key_expires_at !== null && row.key_expires_at <= now) {
      throw new UnauthenticatedError('The API key of this session has expired');
    }
    return {
      kind: 'user',
      userId: row.user_id,
      keyId: row.key_id,
      sessionExpiresAt: row.expires_at,
    };
  }

  /** Removes sessions past their expiry (a housekeeping task). */
  purgeExpired(): Promise<number> {
    return this.store.repos.sessions.deleteExpired(this.clock.now());
  }

  async signOut(token: string): Promise<void> {
    if (TOKEN_PATTERN.test(token)) await this.store.repos.sessions.delete(hashToken(token));
  }
}
