import type { Kysely, Selectable } from 'kysely';
import type { Database, SessionsTable } from '../schema.js';

export type SessionRow = Selectable<SessionsTable>;

/** A session with the state of the API key it was opened with. */
export interface SessionWithKey extends SessionRow {
  key_expires_at: number | null;
  key_revoked_at: number | null;
  key_made_by: string | null;
}

export class SessionsRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(session: SessionRow): Promise<void> {
    await this.db.insertInto('sessions').values(session).execute();
  }

  find(tokenHash: string): Promise<SessionWithKey | undefined> {
    return this.db
      .selectFrom('sessions')
      .innerJoin('api_keys', 'api_keys.id', 'sessions.key_id')
      .select([
        'sessions.token_hash',
        'sessions.user_id',
        'sessions.key_id',
        'sessions.created_at',
        'sessions.expires_at',
        'api_keys.expires_at as key_expires_at',
        'api_keys.revoked_at as key_revoked_at',
        'api_keys.made_by as key_made_by',
      ])
      .where('sessions.token_hash', '=', tokenHash)
      .executeTakeFirst();
  }

  async delete(tokenHash: string): Promise<void> {
    await this.db.deleteFrom('sessions').where('token_hash', '=', tokenHash).execute();
  }

  /** Removes sessions that ended before `now`; returns how many. */
  async deleteExpired(now: number): Promise<number> {
    const result = await this.db
      .deleteFrom('sessions')
      .where('expires_at', '<=', now)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
