import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';

/**
 * Read-only questions about registered agents that delivery needs answered (the registry
 * owns writing them).
 */
export class AgentDirectoryRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** The agent's registered URL: undefined when not registered, null when it has none. */
  async findRedirectUrl(address: string): Promise<string | null | undefined> {
    const row = await this.db
      .selectFrom('agents')
      .select('redirect_url')
      .where('address', '=', address)
      .executeTakeFirst();
    return row?.redirect_url;
  }

  async isRegistered(address: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('agents')
      .select('address')
      .where('address', '=', address)
      .executeTakeFirst();
    return row !== undefined;
  }
}
