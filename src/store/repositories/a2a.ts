import type { Kysely, Selectable } from 'kysely';
import type { CompiledStatements } from '../compiled.js';
import type { A2aRemoteAgentsTable, Database } from '../schema.js';

export type A2aAccess = 'private' | 'public';
export type A2aRemoteAgentRow = Selectable<A2aRemoteAgentsTable>;

/** A2A (docs/a2a.md): who may call which agent, conversations, and external agents. */
export class A2aRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly statements: CompiledStatements,
  ) {}

  // ---- Outward ----------------------------------------------------------------------------

  /** To whom the agent is served over A2A; undefined when it is not. */
  async access(address: string): Promise<A2aAccess | undefined> {
    const row = await this.db
      .selectFrom('a2a_access')
      .select('access')
      .where('address', '=', address)
      .executeTakeFirst();
    return row?.access;
  }

  async setAccess(address: string, access: A2aAccess | 'off', at: number): Promise<void> {
    if (access === 'off') {
      await this.db.deleteFrom('a2a_access').where('address', '=', address).execute();
      return;
    }
    await this.db
      .insertInto('a2a_access')
      .values({ address, access, updated_at: at })
      .onConflict((oc) => oc.column('address').doUpdateSet({ access, updated_at: at }))
      .execute();
  }

  /** The agents served to anyone, by address, a page at a time after `after`. */
  listPublic(after: string, limit: number): Promise<{ address: string }[]> {
    return this.db
      .selectFrom('a2a_access')
      .select('address')
      .where('access', '=', 'public')
      .where('address', '>', after)
      .orderBy('address')
      .limit(limit)
      .execute();
  }

  /** The chat session a caller's conversation with an agent is carried in. */
  async contextSession(
    agent: string,
    caller: string,
    contextId: string,
  ): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('a2a_contexts')
      .select('session_id')
      .where('agent', '=', agent)
      .where('caller', '=', caller)
      .where('context_id', '=', contextId)
      .executeTakeFirst();
    return row?.session_id;
  }

  async addContext(row: {
    agent: string;
    caller: string;
    context_id: string;
    session_id: string;
    created_at: number;
  }): Promise<void> {
    await this.db
      .insertInto('a2a_contexts')
      .values(row)
      .onConflict((oc) => oc.columns(['agent', 'caller', 'context_id']).doNothing())
      .execute();
  }

  // ---- Inward -----------------------------------------------------------------------------

  /**
   * Compiled once and kept prepared: the Almanac asks it the first time it meets an address it
   * does not hold (an external agent resolves to this service's mailbox).
   */
  async findRemote(address: string): Promise<A2aRemoteAgentRow | undefined> {
    return this.statements.first(
      this.db,
      'a2a_remote_agents.find',
      [address],
      () =>
        this.db
          .selectFrom('a2a_remote_agents')
          .select([
            'address',
            'owner_id',
            'card_url',
            'card',
            'rpc_url',
            'protocol_version',
            'key_ciphertext',
            'card_read_at',
            'created_at',
          ])
          .where('address', '=', address)
          .compile(),
      { prepared: true },
    );
  }

  /** The owner's external agent registered from this card URL, if any. */
  findRemoteByCard(ownerId: string, cardUrl: string): Promise<A2aRemoteAgentRow | undefined> {
    return this.db
      .selectFrom('a2a_remote_agents')
      .selectAll()
      .where('owner_id', '=', ownerId)
      .where('card_url', '=', cardUrl)
      .executeTakeFirst();
  }

  async addRemote(row: A2aRemoteAgentRow): Promise<void> {
    await this.db.insertInto('a2a_remote_agents').values(row).execute();
  }

  async updateRemoteCard(
    address: string,
    changes: Pick<A2aRemoteAgentRow, 'card' | 'rpc_url' | 'protocol_version' | 'card_read_at'>,
  ): Promise<void> {
    await this.db
      .updateTable('a2a_remote_agents')
      .set(changes)
      .where('address', '=', address)
      .execute();
  }

  listRemote(ownerId: string, limit: number, offset: number): Promise<A2aRemoteAgentRow[]> {
    return this.db
      .selectFrom('a2a_remote_agents')
      .selectAll()
      .where('owner_id', '=', ownerId)
      .orderBy('created_at', 'desc')
      .orderBy('address')
      .limit(limit)
      .offset(offset)
      .execute();
  }
}
