import type { Kysely, Selectable } from 'kysely';
import type { Database, ServersTable } from '../schema.js';

export type ServerRow = Selectable<ServersTable>;

/** Where the server processes on this database listen (docs/operations.md, `status`). */
export class ServersRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(row: ServerRow): Promise<void> {
    await this.db.insertInto('servers').values(row).execute();
  }

  /** Says the server is still there; answers whether its row was (another process may prune it). */
  async touch(id: string, at: number): Promise<boolean> {
    const result = await this.db
      .updateTable('servers')
      .set({ seen_at: at })
      .where('id', '=', id)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('servers').where('id', '=', id).execute();
  }

  /** Removes the servers not heard of since `before`. */
  async deleteUnseen(before: number): Promise<void> {
    await this.db.deleteFrom('servers').where('seen_at', '<', before).execute();
  }

  /** The servers heard of since `since`, the most recently started first. */
  seenSince(since: number): Promise<ServerRow[]> {
    return this.db
      .selectFrom('servers')
      .selectAll()
      .where('seen_at', '>=', since)
      .orderBy('started_at', 'desc')
      .orderBy('id')
      .execute();
  }
}
