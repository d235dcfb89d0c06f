import type { Kysely, Selectable } from 'kysely';
import { isUniqueViolation } from '../database.js';
import type { Database, DomainsTable } from '../schema.js';

export type DomainRow = Selectable<DomainsTable>;

export interface DomainWithAgents extends DomainRow {
  agents: { address: string; weight: number }[];
}

/** An agent the unique index found already assigned to another domain. */
export type AgentTaken = { taken: string };

/** Names and the agents assigned to them. */
export class DomainsRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Creates the domain for the user; false when the name is already someone's. */
  async claim(row: DomainRow): Promise<boolean> {
    const inserted = await this.db
      .insertInto('domains')
      .values(row)
      .onConflict((oc) => oc.column('name').doNothing())
      .returning('name')
      .executeTakeFirst();
    return inserted !== undefined;
  }

  find(name: string): Promise<DomainRow | undefined> {
    return this.db.selectFrom('domains').selectAll().where('name', '=', name).executeTakeFirst();
  }

  async findWithAgents(name: string): Promise<DomainWithAgents | undefined> {
    const domain = await this.find(name);
    if (!domain) return undefined;
    return (await this.attachAgents([domain]))[0];
  }

  /** A user's domains (every domain when `userId` is undefined), by name. */
  async list(userId?: string, agentAddress?: string): Promise<DomainWithAgents[]> {
    let query = this.db.selectFrom('domains').selectAll('domains');
    if (userId !== undefined) query = query.where('domains.user_id', '=', userId);
    if (agentAddress !== undefined) {
      query = query.where((eb) =>
        eb.exists(
          eb
            .selectFrom('domain_agents')
            .select('domain_agents.address')
            .whereRef('domain_agents.domain', '=', 'domains.name')
            .where('domain_agents.address', '=', agentAddress),
        ),
      );
    }
    return this.attachAgents(await query.orderBy('domains.name').execute());
  }

  /**
   * Replaces the agents assigned to the domain. An agent of another domain is refused by the
   * unique index; on PostgreSQL the transaction cannot continue after it.
   */
  async assign(
    name: string,
    agents: { address: string; weight: number }[],
    updatedAt: number,
  ): Promise<AgentTaken | undefined> {
    await this.db.deleteFrom('domain_agents').where('domain', '=', name).execute();
    await this.db
      .updateTable('domains')
      .set({ updated_at: updatedAt })
      .where('name', '=', name)
      .execute();
    if (agents.length === 0) return undefined;
    const taken = await this.db
      .selectFrom('domain_agents')
      .select(['address', 'domain'])
      .where(
        'address',
        'in',
        agents.map((agent) => agent.address),
      )
      .executeTakeFirst();
    if (taken) return { taken: taken.address };
    try {
      await this.db
        .insertInto('domain_agents')
        .values(agents.map((agent) => ({ domain: name, ...agent })))
        .execute();
    } catch (err) {
      if (isUniqueViolation(err)) return { taken: agents[0]!.address };
      throw err;
    }
    return undefined;
  }

  async delete(name: string): Promise<void> {
    await this.db.deleteFrom('domain_agents').where('domain', '=', name).execute();
    await this.db.deleteFrom('domains').where('name', '=', name).execute();
  }

  private async attachAgents(domains: DomainRow[]): Promise<DomainWithAgents[]> {
    if (domains.length === 0) return [];
    const rows = await this.db
      .selectFrom('domain_agents')
      .selectAll()
      .where(
        'domain',
        'in',
        domains.map((domain) => domain.name),
      )
      .orderBy('domain')
      .orderBy('address')
      .execute();
    return domains.map((domain) => ({
      ...domain,
      created_at: Number(domain.created_at),
      updated_at: Number(domain.updated_at),
      agents: rows
        .filter((row) => row.domain === domain.name)
        .map((row) => ({ address: row.address, weight: Number(row.weight) })),
    }));
  }
}
