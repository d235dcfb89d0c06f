import { randomUUID } from 'node:crypto';
import { generateApiKey } from '../auth/api-keys.js';
import { ConflictError, NotFoundError, RequestValidationError } from '../errors.js';
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

/**
 * Users: each is made with a first API key, so that it can call the API at once (further keys
 * are the keys service's).
 */
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
}
