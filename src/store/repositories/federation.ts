import type { Kysely, Selectable } from 'kysely';
import type { Database, FederationIdentityTable } from '../schema.js';

export type FederationIdentityRow = Selectable<FederationIdentityTable>;

/** Federation (docs/federation.md): the instance's key and the agents published. */
export class FederationRepository {
  constructor(private readonly db: Kysely<Database>) {}

  findIdentity(): Promise<FederationIdentityRow | undefined> {
    return this.db
      .selectFrom('federation_identity')
      .selectAll()
      .where('id', '=', 1)
      .executeTakeFirst();
  }

  /** Stores the identity unless another process stored one first; answers the one kept. */
  async addIdentity(row: Omit<FederationIdentityRow, 'id'>): Promise<FederationIdentityRow> {
    await this.db
      .insertInto('federation_identity')
      .values({ id: 1, ...row })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
    return (await this.findIdentity())!;
  }

  /** When the agent was published; undefined when it is not. */
  async publishedAt(address: string): Promise<number | undefined> {
    const row = await this.db
      .selectFrom('published_agents')
      .select('published_at')
      .where('address', '=', address)
      .executeTakeFirst();
    return row === undefined ? undefined : Number(row.published_at);
  }

  async publish(address: string, at: number): Promise<void> {
    await this.db
      .insertInto('published_agents')
      .values({ address, published_at: at })
      .onConflict((oc) => oc.column('address').doNothing())
      .execute();
  }

  async unpublish(address: string): Promise<void> {
    await this.db.deleteFrom('published_agents').where('address', '=', address).execute();
  }

  /** Which of `addresses` are published. */
  async publishedAmong(addresses: string[]): Promise<Set<string>> {
    if (addresses.length === 0) return new Set();
    const rows = await this.db
      .selectFrom('published_agents')
      .select('address')
      .where('address', 'in', addresses)
      .execute();
    return new Set(rows.map((row) => row.address));
  }

  async countPublished(): Promise<number> {
    const row = await this.db
      .selectFrom('published_agents')
      .select((eb) => eb.fn.countAll<string | number>().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }
}
