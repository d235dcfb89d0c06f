import { generateApiKey, parseApiKey, secretMatches } from '../auth/api-keys.js';
import { memberOf, type KeyScope, type UserPrincipal } from '../auth/principal.js';
import { ForbiddenError, NotFoundError, UnauthenticatedError } from '../errors.js';
import type { ChangeFeed } from '../infra/change-feed.js';
import type { Clock } from '../infra/clock.js';
import type { Store } from '../store/index.js';
import type { ApiKeyRow } from '../store/repositories/keys.js';
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
 * Who makes a key over HTTP (the operator's command line makes keys as no one): a key can
 * make none broader than itself, and a key a member makes for a team is that member's.
 */
export interface KeyMaker {
  /** The scope of the key the request was made with, if it has one. */
  scope?: KeyScope;
  /** When that key expires: a key it makes expires no later. */
  expiresAt?: number;
  /** The member acting for the team that will own the key. */
  member?: string;
}

/** A key's maker as a request's principal stands for it. */
export function makerOf(principal: UserPrincipal): KeyMaker {
  const member = memberOf(principal);
  return {
    ...(principal.scope && { scope: principal.scope }),
    ...(principal.keyExpiresAt !== undefined && { expiresAt: principal.keyExpiresAt }),
    ...(member !== undefined && { member }),
  };
}

/**
 * API keys: a user holds any number, each with an optional label and lifetime; a key stops
 * working when it is revoked or expires. Only a hash of each secret is stored.
 */
export class KeysService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly users: UsersService,
    private readonly feed: ChangeFeed,
  ) {}

  /**
   * Creates a key for a user (or team); the token is shown once. Made by a scoped or expiring
   * key (`maker`), it may be no broader than that key: read-only if it is, limited to some of
   * its agents if it is limited, expiring no later (by then, when no lifetime is asked for).
   */
  async createKey(
    userId: string,
    options: { label?: string | null; lifetimeMs?: number } & KeyScopeInput = {},
    maker: KeyMaker = {},
  ): Promise<NewKey> {
    const now = this.clock.now();
    const key = generateApiKey();
    const label = options.label ?? null;
    const readOnly = options.readOnly ?? false;
    const addresses = options.addresses ? [...new Set(options.addresses)] : null;
    let expiresAt = options.lifetimeMs === undefined ? null : now + options.lifetimeMs;
    if (maker.scope?.readOnly && !readOnly) {
      throw new ForbiddenError('A read-only key makes only read-only keys: set read_only');
    }
    const within = maker.scope?.addresses;
    if (within && (addresses === null || addresses.some((a) => !within.includes(a)))) {
      throw new ForbiddenError(
        'A key limited to agents makes only keys limited to some of its own agents: list them in addresses',
      );
    }
    if (maker.expiresAt !== undefined) {
      if (expiresAt !== null && expiresAt > maker.expiresAt) {
        throw new ForbiddenError(
          `The key this call is made with expires at ${new Date(maker.expiresAt).toISOString()}: a key it makes expires no later`,
        );
      }
      expiresAt ??= maker.expiresAt;
    }
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
      made_by: maker.member ?? null,
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
    if (await this.store.repos.apiKeys.revoke(keyId, this.clock.now(), userId)) {
      void this.feed.publish([{ kind: 'key.revoked', keyId }]);
      return;
    }
    const row = await this.store.repos.apiKeys.findById(keyId);
    if (!row || (userId !== undefined && row.user_id !== userId)) {
      throw new NotFoundError(`No key with id ${keyId}`);
    }
    throw new NotFoundError(`Key ${keyId} is already revoked`);
  }

  /** Resolves a Bearer token to its user, or says why it cannot be used. */
  async authenticate(token: string): Promise<UserPrincipal> {
    const parsed = parseApiKey(token);
    const row = parsed && (await this.store.repos.apiKeys.findById(parsed.id));
    if (!parsed || !row || !secretMatches(parsed.secret, row.secret_hash)) {
      throw new UnauthenticatedError('Invalid API key');
    }
    const refusal = await this.refusal(row);
    if (refusal !== undefined) throw new UnauthenticatedError(refusal);
    const scope = scopeOf(row);
    return {
      kind: 'user',
      userId: row.user_id,
      keyId: row.id,
      ...(row.expires_at !== null && { keyExpiresAt: row.expires_at }),
      ...(row.made_by !== null && { member: row.made_by }),
      ...(scope && { scope }),
    };
  }

  /** Why the key of this id no longer works, or undefined while it does (open streams ask). */
  async standing(keyId: string): Promise<string | undefined> {
    const row = await this.store.repos.apiKeys.findById(keyId);
    return row ? this.refusal(row) : 'The API key no longer exists';
  }

  /**
   * Why a key no longer works: revoked, expired, or made for a team by a member who is no
   * longer one (docs/teams.md, "Keys of members who leave").
   */
  async refusal(
    row: Pick<ApiKeyRow, 'user_id' | 'revoked_at' | 'expires_at' | 'made_by'>,
  ): Promise<string | undefined> {
    if (row.revoked_at !== null) return 'API key has been revoked';
    if (row.expires_at !== null && row.expires_at <= this.clock.now()) return 'API key has expired';
    if (
      row.made_by !== null &&
      !(await this.store.repos.teams.isMember(row.user_id, row.made_by))
    ) {
      return 'API key was made for a team by a member who has left it';
    }
    return undefined;
  }
}
