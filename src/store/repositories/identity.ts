import type { Kysely, Selectable } from 'kysely';
import type { ChallengesTable, Database, IdentitiesTable } from '../schema.js';

export type ChallengeRow = Selectable<ChallengesTable>;
export type IdentityRow = Selectable<IdentitiesTable>;

export class ChallengesRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(row: ChallengeRow): Promise<void> {
    await this.db.insertInto('challenges').values(row).execute();
  }

  /**
   * Removes and returns the challenge if it was issued to this user for this address. The
   * delete is the single-use guarantee: of two concurrent proofs only one gets the row back.
   * A challenge of another user or address is left alone, so nobody can burn it for its owner.
   */
  takeFor(challenge: string, userId: string, address: string): Promise<ChallengeRow | undefined> {
    return this.db
      .deleteFrom('challenges')
      .where('challenge', '=', challenge)
      .where('user_id', '=', userId)
      .where('address', '=', address)
      .returningAll()
      .executeTakeFirst();
  }

  async deleteExpired(now: number): Promise<number> {
    const result = await this.db
      .deleteFrom('challenges')
      .where('expires_at', '<', now)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}

export class IdentitiesRepository {
  constructor(private readonly db: Kysely<Database>) {}

  find(address: string): Promise<IdentityRow | undefined> {
    return this.db
      .selectFrom('identities')
      .selectAll()
      .where('address', '=', address)
      .executeTakeFirst();
  }

  /**
   * Claims the address for the user unless someone holds it, and returns the owner after the
   * attempt. Insert-or-ignore makes the first of two racing claims win on both dialects.
   */
  async claim(address: string, userId: string, now: number): Promise<string> {
    await this.db
      .insertInto('identities')
      .values({ address, user_id: userId, proven_at: now })
      .onConflict((oc) => oc.column('address').doNothing())
      .execute();
    const owner = await this.db
      .selectFrom('identities')
      .select('user_id')
      .where('address', '=', address)
      .executeTakeFirstOrThrow();
    if (owner.user_id === userId) {
      await this.db
        .updateTable('identities')
        .set({ proven_at: now })
        .where('address', '=', address)
        .execute();
    }
    return owner.user_id;
  }

  async release(address: string, userId: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('identities')
      .where('address', '=', address)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }
}
