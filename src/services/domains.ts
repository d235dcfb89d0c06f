import { ConflictError, ForbiddenError, NotFoundError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import type { Repositories, Store } from '../store/index.js';
import type { DomainWithAgents } from '../store/repositories/domains.js';

export interface AgentWeight {
  address: string;
  weight: number;
}

/**
 * Who acts on a name: a user over HTTP (their own names and agents only), or the operator on
 * the command line, who may assign any agent and, without a user, change any name.
 */
export interface DomainActor {
  userId: string | null;
  operator?: boolean;
}

/**
 * Names: a user claims a domain such as `alice.agent` and assigns agents to it with weights;
 * uAgents resolves `ctx.send("alice.agent", …)` by picking one of them by weight. A name has
 * one owner and only the owner changes it; an agent belongs to at most one name. Names do not
 * expire. Names arrive validated (lower case, dotted labels) from the edge.
 */
export class DomainsService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  async get(name: string): Promise<DomainWithAgents> {
    const domain = await this.store.repos.domains.findWithAgents(name);
    if (!domain) throw new NotFoundError(`domain not found: ${name}`);
    return domain;
  }

  async isAvailable(name: string): Promise<boolean> {
    return (await this.store.repos.domains.find(name)) === undefined;
  }

  /** The address a name resolves to this time: one of its agents, chosen by weight. */
  async pick(name: string): Promise<string | undefined> {
    const domain = await this.store.repos.domains.findWithAgents(name);
    if (!domain || domain.agents.length === 0) return undefined;
    const total = domain.agents.reduce((sum, agent) => sum + agent.weight, 0);
    let point = Math.random() * total;
    for (const agent of domain.agents) {
      point -= agent.weight;
      if (point < 0) return agent.address;
    }
    return domain.agents[domain.agents.length - 1]!.address;
  }

  /** A user's names (every name when `userId` is undefined). */
  list(userId?: string, agentAddress?: string): Promise<DomainWithAgents[]> {
    return this.store.repos.domains.list(userId, agentAddress);
  }

  /** Claims a free name for the user, with the agents given; 409 when the name is taken. */
  async create(actor: DomainActor, name: string, agents: AgentWeight[]): Promise<DomainWithAgents> {
    return this.store.transaction(async (tx) => {
      const now = this.clock.now();
      const claimed = await tx.domains.claim({
        name,
        user_id: ownerOf(actor),
        created_at: now,
        updated_at: now,
      });
      if (!claimed) throw new ConflictError(`Domain ${name} is already taken`);
      await this.assign(tx, actor, name, agents);
      return (await tx.domains.findWithAgents(name))!;
    });
  }

  /** Replaces the agents of a name the user owns. */
  async update(actor: DomainActor, name: string, agents: AgentWeight[]): Promise<DomainWithAgents> {
    return this.store.transaction(async (tx) => {
      await this.owned(tx, actor, name);
      await this.assign(tx, actor, name, agents);
      return (await tx.domains.findWithAgents(name))!;
    });
  }

  /**
   * Adds one agent to a name (or changes its weight), claiming the name for the user first
   * when nobody has it: the command line's `domains add`.
   */
  async addAgent(actor: DomainActor, name: string, agent: AgentWeight): Promise<DomainWithAgents> {
    return this.store.transaction(async (tx) => {
      const now = this.clock.now();
      await tx.domains.claim({ name, user_id: ownerOf(actor), created_at: now, updated_at: now });
      const domain = await this.owned(tx, actor, name);
      const agents = [
        ...domain.agents.filter((assigned) => assigned.address !== agent.address),
        agent,
      ];
      await this.assign(tx, actor, name, agents);
      return (await tx.domains.findWithAgents(name))!;
    });
  }

  /** Releases a name the user owns (any name, for the operator). */
  async remove(actor: DomainActor, name: string): Promise<void> {
    await this.store.transaction(async (tx) => {
      await this.owned(tx, actor, name);
      await tx.domains.delete(name);
    });
  }

  private async owned(tx: Repositories, actor: DomainActor, name: string) {
    const domain = await tx.domains.findWithAgents(name);
    if (!domain) throw new NotFoundError(`domain not found: ${name}`);
    if (actor.userId !== null && domain.user_id !== actor.userId) {
      throw new ForbiddenError(`Domain ${name} belongs to another user`);
    }
    return domain;
  }

  private async assign(
    tx: Repositories,
    actor: DomainActor,
    name: string,
    agents: AgentWeight[],
  ): Promise<void> {
    const unique = new Map(agents.map((agent) => [agent.address, agent]));
    if (!actor.operator) {
      for (const address of unique.keys()) {
        const listing = await tx.agents.find(address);
        const identity = await tx.identities.find(address);
        if (listing?.user_id !== actor.userId && identity?.user_id !== actor.userId) {
          throw new NotFoundError(`Agent ${address} not found`);
        }
      }
    }
    const outcome = await tx.domains.assign(name, [...unique.values()], this.clock.now());
    if (outcome) {
      throw new ConflictError(`Agent ${outcome.taken} is already assigned to another domain`);
    }
  }
}

function ownerOf(actor: DomainActor): string {
  if (actor.userId === null) throw new ForbiddenError('A name is claimed for a user');
  return actor.userId;
}
