import type { Kysely, Selectable } from 'kysely';
import { isUniqueViolation } from '../database.js';
import type { Dialect } from '../dialect.js';
import type { Database, UsersTable } from '../schema.js';

export type UserRow = Selectable<UsersTable>;

export class UsersRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: Dialect,
  ) {}

  /**
   * Inside a transaction, makes other transactions that lock the same user wait until this
   * one ends, so a rule over everything a user owns (a quota) sees no concurrent change.
   */
  lock(id: string): Promise<void> {
    return this.dialect.lockUser(this.db, id);
  }

  /** Inserts the user; 'name-taken' when another has its name (say, a replica at once). */
  async insert(user: UserRow): Promise<'inserted' | 'name-taken'> {
    try {
      await this.db.insertInto('users').values(user).execute();
      return 'inserted';
    } catch (err) {
      if (isUniqueViolation(err)) return 'name-taken';
      throw err;
    }
  }

  findById(id: string): Promise<UserRow | undefined> {
    return this.db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
  }

  findByName(name: string): Promise<UserRow | undefined> {
    return this.db.selectFrom('users').selectAll().where('name', '=', name).executeTakeFirst();
  }

  /** Users, teams' owner accounts left out (they are listed as teams). */
  list(): Promise<UserRow[]> {
    return this.db
      .selectFrom('users')
      .selectAll()
      .where('id', 'not in', (eb) => eb.selectFrom('teams').select('id'))
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  async count(): Promise<number> {
    const row = await this.db
      .selectFrom('users')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }
}
