import { generateApiKey, parseApiKey, secretMatches } from '../auth/api-keys.js';
import type { KeyScope, Principal } from '../auth/principal.js';
import { NotFoundError, UnauthenticatedError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import type { Store } from '../store/index.js';
import type { UsersService } from './users.js';

/** What is shown of an API key after it is made: everything but its secret. */
export interface ApiKeyInfo {
  id: string;
  label: string | null;
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
  /** True for a key limited to safe methods (GET, HEAD). */
  readOnly: boolean;
  /** The agents the key is limited to; null for all. */
  addresses: string[] | null;
}

/** What a key is limited to when it is made; nothing given: the user's full power. */
export interface KeyScopeInput {
  readOnly?: boolean;
  /** Agent addresses (canonical); an empty list is refused by the wire schema. */
  addresses?: string[] | null;
}

function scopeOf(row: { read_only: number; addresses: string | null }): KeyScope | undefined {
  if (row.read_only === 0 && row.addresses === null) return undefined;
  return {
    readOnly: row.read_only !== 0,
    addresses: row.addresses === null ? null : (JSON.parse(row.addresses) as string[]),
  };
}

/** A key just made, with the key itself (`token`), which is shown this once. */
export type NewKey = ApiKeyInfo & { token: string };

/**
 * API keys: a user holds any number, each with an optional label and lifetime; a key stops
 * working when it is revoked or expires. Only a hash of each secret is stored.
 */
export class KeysService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly users: UsersService,
  ) {}

  /** Creates a key for a user; the token is shown once. */
  async createKey(
    userId: string,
    options: { label?: string | null; lifetimeMs?: number } & KeyScopeInput = {},
  ): Promise<NewKey> {
    const now = this.clock.now();
    const key = generateApiKey();
    const expiresAt = options.lifetimeMs === undefined ? null : now + options.lifetimeMs;
    const label = options.label ?? null;
    const readOnly = options.readOnly ?? false;
    const addresses = options.addresses ? [...new Set(options.addresses)] : null;
    await this.store.repos.apiKeys.insert({
      id: key.id,
      user_id: userId,
      secret_hash: key.secretHash,
      created_at: now,
      expires_at: expiresAt,
      revoked_at: null,
      label,
      read_only: readOnly ? 1 : 0,
      addresses: addresses === null ? null : JSON.stringify(addresses),
    });
    return {
      id: key.id,
      label,
      createdAt: now,
      expiresAt,
      revokedAt: null,
      readOnly,
      addresses,
      token: key.token,
    };
  }

  /** The keys of a user (by name or id), oldest first. */
  async listKeys(nameOrId: string): Promise<ApiKeyInfo[]> {
    const user = await this.users.findUser(nameOrId);
    const rows = await this.store.repos.apiKeys.listForUser(user.id);
    return rows.map((r) => ({
      id: r.id,
      label: r.label ?? null,
      createdAt: r.created_at,
      expiresAt: r.expires_at,
      revokedAt: r.revoked_at,
      readOnly: r.read_only !== 0,
      addresses: r.addresses === null ? null : (JSON.parse(r.addresses) as string[]),
    }));
  }

  /**
   * Revokes a key. Given a user, only one of that user's own keys: a key of anyone else is
   * answered as if it did not exist.
   */
  async revokeKey(keyId: string, userId?: string): Promise<void> {
    if (await this.store.repos.apiKeys.revoke(keyId, this.clock.now(), userId)) return;
    const row = await this.store.repos.apiKeys.findById(keyId);
    if (!row || (userId !== undefined && row.user_id !== userId)) {
      throw new NotFoundError(`No key with id ${keyId}`);
    }
    throw new NotFoundError(`Key ${keyId} is already revoked`);
  }

  /** Resolves a Bearer token to its user, or says why it cannot be used. */
  async authenticate(token: string): Promise<Extract<Principal, { kind: 'user' }>> {
    const parsed = parseApiKey(token);
    const row = parsed && (await this.store.repos.apiKeys.findById(parsed.id));
    if (!parsed || !row || !secretMatches(parsed.secret, row.secret_hash)) {
      throw new UnauthenticatedError('Invalid API key');
    }
    if (row.revoked_at !== null) throw new UnauthenticatedError('API key has been revoked');
    if (row.expires_at !== null && row.expires_at <= this.clock.now()) {
      throw new UnauthenticatedError('API key has expired');
    }
    const scope = scopeOf(row);
    return { kind: 'user', userId: row.user_id, keyId: row.id, ...(scope ? { scope } : {}) };
  }
}
