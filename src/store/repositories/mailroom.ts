import type { Kysely, Selectable } from 'kysely';
import type { Database, V1ChallengesTable, V1TokensTable } from '../schema.js';

export type V1TokenRow = Selectable<V1TokensTable>;
export type V1ChallengeRow = Selectable<V1ChallengesTable>;

/** The v1 mailroom's agent challenges and access tokens (tokens by their hash). */
export class MailroomRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insertChallenge(row: V1ChallengeRow): Promise<void> {
    await this.db.insertInto('v1_challenges').values(row).execute();
  }

  /**
   * Removes and returns the challenge if it was issued for this address: of two proofs of
   * one challenge only one gets the row back. A challenge of another address is left alone.
   */
  takeChallenge(challenge: string, address: string): Promise<V1ChallengeRow | undefined> {
    return this.db
      .deleteFrom('v1_challenges')
      .where('challenge', '=', challenge)
      .where('address', '=', address)
      .returningAll()
      .executeTakeFirst();
  }

  async insertToken(row: V1TokenRow): Promise<void> {
    await this.db.insertInto('v1_tokens').values(row).execute();
  }

  findToken(tokenHash: string): Promise<V1TokenRow | undefined> {
    return this.db
      .selectFrom('v1_tokens')
      .selectAll()
      .where('token_hash', '=', tokenHash)
      .executeTakeFirst();
  }

  /** Removes challenges and tokens that ended by `now`; returns how many. */
  async deleteExpired(now: number): Promise<number> {
    const challenges = await this.db
      .deleteFrom('v1_challenges')
      .where('expires_at', '<=', now)
      .executeTakeFirst();
    const tokens = await this.db
      .deleteFrom('v1_tokens')
      .where('expires_at', '<=', now)
      .executeTakeFirst();
    return Number(challenges.numDeletedRows) + Number(tokens.numDeletedRows);
  }
}
