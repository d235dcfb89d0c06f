import { randomUUID } from 'node:crypto';
import { generateApiKey, parseApiKey, secretMatches } from '../auth/api-keys.js';
import type { Principal } from '../auth/principal.js';
import {
  ConflictError,
  NotFoundError,
  RequestValidationError,
  UnauthenticatedError,
} from '../errors.js';
import type { Store } from '../store/index.js';
import type { UserRow } from '../store/repositories/users.js';
import type { Clock } from '../infra/clock.js';

const USER_NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;

export interface NewUser {
  user: UserRow;
  keyId: string;
  /** The API key, shown once. */
  token: string;
}

export interface ApiKeyInfo {
  id: string;
  label: string | null;
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
}

export class UsersService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  async createUser(name: string): Promise<NewUser> {
    if (!USER_NAME.test(name)) {
      throw RequestValidationError.single(
        ['name'],
        'User names are 1 to 64 letters, digits or . _ @ -, starting with a letter or digit',
      );
    }
    const now = this.clock.now();
    const user: UserRow = { id: randomUUID(), name, created_at: now };
    const key = generateApiKey();
    await this.store.transaction(async (tx) => {
      if ((await tx.users.insert(user)) === 'name-taken') {
        throw new ConflictError(`A user named "${name}" already exists`);
      }
      await tx.apiKeys.insert({
        id: key.id,
        user_id: user.id,
        secret_hash: key.secretHash,
        created_at: now,
        expires_at: null,
        revoked_at: null,
      });
    });
    return { user, keyId: key.id, token: key.token };
  }

  /**
   * On a store without users, creates one so that a newcomer can call the API straight
   * away; returns it, or undefined when users exist already.
   */
  async bootstrap(name = 'admin'): Promise<NewUser | undefined> {
    if ((await this.store.repos.users.count()) > 0) return undefined;
    try {
      return await this.createUser(name);
    } catch (err) {
      // Another replica bootstrapped at the same moment.
      if (err instanceof ConflictError) return undefined;
      throw err;
    }
  }

  /** Finds a user by name or id. */
  async findUser(nameOrId: string): Promise<UserRow> {
    const repo = this.store.repos.users;
    const user = (await repo.findByName(nameOrId)) ?? (await repo.findById(nameOrId));
    if (!user) throw new NotFoundError(`No user named "${nameOrId}"`);
    return user;
  }

  listUsers(): Promise<UserRow[]> {
    return this.store.repos.users.list();
  }

  /** Creates a key for a user; the token is shown once. */
  async createKey(
    userId: string,
    options: { label?: string | null; lifetimeMs?: number } = {},
  ): Promise<ApiKeyInfo & { token: string }> {
    const now = this.clock.now();
    const key = generateApiKey();
    const expiresAt = options.lifetimeMs === undefined ? null : now + options.lifetimeMs;
    const label = options.label ?? null;
    await this.store.repos.apiKeys.insert({
      id: key.id,
      user_id: userId,
      secret_hash: key.secretHash,
      created_at: now,
      expires_at: expiresAt,
      revoked_at: null,
      label,
    });
    return { id: key.id, label, createdAt: now, expiresAt, revokedAt: null, token: key.token };
  }

  async listKeys(nameOrId: string): Promise<ApiKeyInfo[]> {
    const user = await this.findUser(nameOrId);
    const rows = await this.store.repos.apiKeys.listForUser(user.id);
    return rows.map((r) => ({
      id: r.id,
      label: r.label ?? null,
      createdAt: r.created_at,
      expiresAt: r.expires_at,
      revokedAt: r.revoked_at,
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
    return { kind: 'user', userId: row.user_id, keyId: row.id };
  }
}
