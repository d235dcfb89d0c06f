import type { Insertable, Kysely, Selectable } from 'kysely';
import type { Database, InteractionsTable } from '../schema.js';

export type InteractionRow = Selectable<InteractionsTable>;

/** Interactions agents report between each other, kept for their owners' statistics. */
export class InteractionsRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(interaction: Insertable<InteractionsTable>): Promise<void> {
    await this.db.insertInto('interactions').values(interaction).execute();
  }

  listBySource(source: string): Promise<InteractionRow[]> {
    return this.db
      .selectFrom('interactions')
      .selectAll()
      .where('source', '=', source)
      .orderBy('id')
      .execute();
  }
}
