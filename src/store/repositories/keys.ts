import type { Insertable, Kysely, Selectable } from 'kysely';
import type { ApiKeysTable, Database } from '../schema.js';

export type ApiKeyRow = Selectable<ApiKeysTable>;

/** Users' API keys, each stored with the hash of its secret, never the secret. */
export class ApiKeysRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(key: Insertable<ApiKeysTable>): Promise<void> {
    await this.db.insertInto('api_keys').values(key).execute();
  }

  findById(id: string): Promise<ApiKeyRow | undefined> {
    return this.db.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirst();
  }

  listForUser(userId: string): Promise<ApiKeyRow[]> {
    return this.db
      .selectFrom('api_keys')
      .selectAll()
      .where('user_id', '=', userId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  /**
   * Revokes the keys of a team that one member made while acting for it (they leave with the
   * member); answers their ids.
   */
  async revokeMadeBy(teamId: string, memberId: string, at: number): Promise<string[]> {
    const rows = await this.db
      .updateTable('api_keys')
      .set({ revoked_at: at })
      .where('user_id', '=', teamId)
      .where('made_by', '=', memberId)
      .where('revoked_at', 'is', null)
      .returning('id')
      .execute();
    return rows.map((row) => row.id);
  }

  /**
   * Marks a key revoked; false when there is no such key (of that user, when one is named) or
   * it was already revoked.
   */
  async revoke(id: string, at: number, userId?: string): Promise<boolean> {
    let query = this.db
      .updateTable('api_keys')
      .set({ revoked_at: at })
      .where('id', '=', id)
      .where('revoked_at', 'is', null);
    if (userId !== undefined) query = query.where('user_id', '=', userId);
    const result = await query.executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }
}
