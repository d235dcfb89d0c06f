import type { Kysely, Selectable } from 'kysely';
import type { Database, McpSessionsTable } from '../schema.js';

export type McpSessionRow = Selectable<McpSessionsTable>;

/** MCP sessions (docs/mcp.md). */
export class McpSessionsRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(row: McpSessionRow): Promise<void> {
    await this.db.insertInto('mcp_sessions').values(row).execute();
  }

  find(id: string): Promise<McpSessionRow | undefined> {
    return this.db.selectFrom('mcp_sessions').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async touch(id: string, at: number): Promise<void> {
    await this.db
      .updateTable('mcp_sessions')
      .set({ last_seen_at: at })
      .where('id', '=', id)
      .execute();
  }

  /** Deletes the session; answers whether there was one. */
  async delete(id: string): Promise<boolean> {
    const result = await this.db.deleteFrom('mcp_sessions').where('id', '=', id).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** The owner's sessions, the most recently used first. */
  listByOwner(ownerId: string, limit: number): Promise<McpSessionRow[]> {
    return this.db
      .selectFrom('mcp_sessions')
      .selectAll()
      .where('owner_id', '=', ownerId)
      .orderBy('last_seen_at', 'desc')
      .limit(limit)
      .execute();
  }

  /** How many sessions were used at `since` or later. */
  async countUsedSince(since: number): Promise<number> {
    const row = await this.db
      .selectFrom('mcp_sessions')
      .select((eb) => eb.fn.countAll<number | string>().as('n'))
      .where('last_seen_at', '>=', since)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Removes sessions unused since `before`; answers how many. */
  async deleteIdle(before: number): Promise<number> {
    const result = await this.db
      .deleteFrom('mcp_sessions')
      .where('last_seen_at', '<', before)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
