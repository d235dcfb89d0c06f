import {
  ConflictError,
  DomainError,
  ForbiddenError,
  NotFoundError,
  QuotaExceededError,
} from '../errors.js';
import type { ChangeFeed } from '../infra/change-feed.js';
import type { Clock } from '../infra/clock.js';
import type { Repositories, Store } from '../store/index.js';
import type { AgentListing, ListingChanges, StoredAgent } from '../store/repositories/agents.js';
import type {
  AgentProfile,
  AgentUpdates,
  ProfileInput,
  RegistrationRequest,
} from '../wire/agents.js';
import type { UsageService } from './usage.js';

/** How many agents a user has and may have, kept current while a transaction adds some. */
interface AgentAllowance {
  used: number;
  limit: number;
}

/** A profile with every field, the ones not given empty. */
export function completeProfile(profile: ProfileInput = {}): AgentProfile {
  return {
    description: profile.description ?? '',
    readme: profile.readme ?? '',
    avatar_url: profile.avatar_url ?? '',
    banner_url: profile.banner_url ?? '',
    starter_prompts: profile.starter_prompts ?? [],
  };
}

/** What full-text search reads of a listing. */
function searchText(listing: Pick<AgentListing, 'address' | 'name' | 'handle' | 'profile'>) {
  return {
    address: listing.address,
    name: listing.name,
    handle: listing.handle ?? '',
    description: listing.profile.description,
    readme: listing.profile.readme,
  };
}

/** An agent just registered by its owner. */
export interface RegisteredAgent {
  address: string;
  isNew: boolean;
  agentType: string;
  url: string | null;
}

/** What happens to an agent's history when it is registered and deleted (the activity service). */
export interface AgentHistory {
  registered(agents: RegisteredAgent[]): Promise<void>;
  forget(address: string, until: number): Promise<void>;
}

function registered(registration: RegistrationRequest, isNew: boolean): RegisteredAgent {
  return {
    address: registration.address,
    isNew,
    agentType: registration.agent_type ?? 'uagent',
    url: registration.url ?? null,
  };
}

// The same answer for an agent of another user as for none at all: existence stays private.
function agentNotFound(address: string): NotFoundError {
  return new NotFoundError(`Agent ${address} not found`);
}

function handleTaken(handle: string | null | undefined): ConflictError {
  return new ConflictError(`Handle "${handle}" is already taken by another agent`);
}

/**
 * The registry: a user lists, registers, updates and deletes their own agents. Registering
 * needs a proven identity and creates the agent's mailbox; deleting removes both and
 * releases the identity. Every change of a user's agents runs in one transaction that holds
 * the user's lock, so the agent quota and the identity stay consistent under concurrency.
 * Addresses arrive canonical (the wire formats see to it).
 */
export class AgentsService {
  constructor(
    private readonly store: Store,
    private readonly usage: UsageService,
    private readonly clock: Clock,
    /** Records registrations, and deletes an agent's history with it. */
    private readonly history: AgentHistory,
    private readonly feed: ChangeFeed,
  ) {}

  list(userId: string, limit: number, offset: number): Promise<StoredAgent[]> {
    return this.store.repos.agents.listForUser(userId, limit, offset);
  }

  async get(userId: string, address: string): Promise<StoredAgent> {
    const agent = await this.store.repos.agents.find(address);
    if (agent?.user_id !== userId) throw agentNotFound(address);
    return agent;
  }

  /**
   * Agents with their owner's name, by address, a page at a time after `afterAddress`: every
   * user's, or one user's; for the operator (the command line), with no owner check.
   */
  listAsOperator(
    userId: string | undefined,
    afterAddress: string,
    limit: number,
  ): Promise<{ address: string; name: string; owner: string }[]> {
    return this.store.repos.agents.listWithOwners(userId, afterAddress, limit);
  }

  /** Any agent's listing, for the operator (the command line); undefined when not registered. */
  findAsOperator(address: string): Promise<StoredAgent | undefined> {
    return this.store.repos.agents.find(address);
  }

  /** Whether an agent is registered here. */
  isRegistered(address: string): Promise<boolean> {
    return this.store.repos.agents.isRegistered(address);
  }

  /** An agent's own listing, for the agent itself; 404 when it is not registered. */
  async getOwn(address: string): Promise<StoredAgent> {
    const agent = await this.store.repos.agents.find(address);
    if (!agent) throw agentNotFound(address);
    return agent;
  }

  /** Creates or replaces the caller's listing of an agent whose identity they proved. */
  async register(userId: string, registration: RegistrationRequest): Promise<void> {
    const isNew = await this.store.transaction(async (tx) => {
      const allowance = await this.lockAllowance(tx, userId);
      return this.save(tx, userId, registration, allowance);
    });
    await this.history.registered([registered(registration, isNew)]);
  }

  /**
   * Registers an agent that asked itself, with its attestation, under the user it is enrolled
   * to (or the open registration user): that user holds its identity from then on, as if they
   * had proven it.
   */
  async registerSelf(userId: string, registration: RegistrationRequest): Promise<void> {
    const isNew = await this.store.transaction(async (tx) => {
      const allowance = await this.lockAllowance(tx, userId);
      const owner = await tx.identities.claim(registration.address, userId, this.clock.now());
      if (owner !== userId) {
        throw new ConflictError('Agent address is already registered by another account');
      }
      return this.save(tx, userId, registration, allowance);
    });
    await this.history.registered([registered(registration, isNew)]);
  }

  /**
   * Registers an agent whose key Agentry made and holds (an external A2A agent, docs/a2a.md):
   * its identity is claimed for the user in the same transaction, and it gets no mailbox, for
   * what is sent to it is received here by whoever holds its key. `alongside` writes, in the
   * same transaction, what that holder keeps of it: a refusal anywhere leaves nothing behind.
   */
  async registerHeld(
    userId: string,
    registration: RegistrationRequest,
    alongside: (tx: Repositories) => Promise<void>,
  ): Promise<void> {
    await this.store.transaction(async (tx) => {
      const allowance = await this.lockAllowance(tx, userId);
      const owner = await tx.identities.claim(registration.address, userId, this.clock.now());
      if (owner !== userId) {
        throw new ConflictError('Agent address is already registered by another account');
      }
      await this.save(tx, userId, registration, allowance, { mailbox: false });
      await alongside(tx);
    });
    await this.history.registered([registered(registration, true)]);
  }

  /** Registers every agent or, if any is refused, none; the error names the item refused. */
  async registerBatch(userId: string, registrations: RegistrationRequest[]): Promise<void> {
    const added = await this.store.transaction(async (tx) => {
      const allowance = await this.lockAllowance(tx, userId);
      const isNew: boolean[] = [];
      for (const [index, registration] of registrations.entries()) {
        try {
          isNew.push(await this.save(tx, userId, registration, allowance));
        } catch (err) {
          if (!(err instanceof DomainError)) throw err;
          throw new DomainError(
            err.kind,
            `Agent ${index} (${registration.address}) was refused, so no agent of the batch was registered: ${err.message}`,
          );
        }
      }
      return isNew;
    });
    await this.history.registered(
      registrations.map((registration, index) => registered(registration, added[index]!)),
    );
  }

  /**
   * Changes the fields given; `updates.address` is the agent's (the route checks it).
   * `alongside` writes what else changes with them, in the same transaction.
   */
  async update(
    userId: string,
    updates: AgentUpdates,
    alongside?: (tx: Repositories) => Promise<void>,
  ): Promise<StoredAgent> {
    const { address } = updates;
    const changes: ListingChanges = { updated_at: this.clock.now() };
    if (updates.name !== undefined) changes.name = updates.name;
    if (updates.handle !== undefined) changes.handle = updates.handle;
    if (updates.redirect_url !== undefined) changes.redirect_url = updates.redirect_url;
    if (updates.profile !== undefined) changes.profile = completeProfile(updates.profile);
    if (updates.keep_failed_forwards !== undefined) {
      changes.keep_failed_forwards = updates.keep_failed_forwards;
    }

    return this.store.transaction(async (tx) => {
      await tx.users.lock(userId);
      const agent = await tx.agents.find(address);
      if (agent?.user_id !== userId) throw agentNotFound(address);
      if (
        changes.handle != null &&
        (await tx.enrolments.handleHeldByAnother(changes.handle, address))
      ) {
        throw handleTaken(changes.handle);
      }
      if ((await tx.agents.update(address, changes)) === 'handle-taken') {
        throw handleTaken(changes.handle);
      }
      // A proxy agent in an outage is worth a try now at its new URL.
      if (changes.redirect_url) await tx.proxy.dueNow([address], changes.updated_at);
      const updated = { ...agent, ...changes };
      await tx.search.indexAgent(searchText(updated));
      await alongside?.(tx);
      return updated;
    });
  }

  /**
   * Removes the listing and its mailbox (with pending messages), releases the identity, then
   * deletes the agent's delivery trace: its history goes with it (docs/mailbox.md, "Whose
   * history"), and whoever registers the address next starts with none.
   */
  async delete(userId: string, address: string): Promise<void> {
    const deletedAt = this.clock.now();
    await this.store.transaction(async (tx) => {
      await tx.users.lock(userId);
      const agent = await tx.agents.find(address);
      if (agent?.user_id !== userId) throw agentNotFound(address);
      await tx.mailbox.close(address);
      await tx.search.removeAgent(address);
      await tx.agents.delete(address);
      await tx.identities.release(address, userId);
      // A storage delegation needs the identity: it ends with it (docs/storage.md).
      await tx.storageAssets.endDelegations(address);
    });
    void this.feed.publish([
      { kind: 'mailbox.removed', addresses: [address] },
      { kind: 'agent.deleted', address, userId },
    ]);
    await this.history.forget(address, deletedAt);
  }

  private async lockAllowance(tx: Repositories, userId: string): Promise<AgentAllowance> {
    await tx.users.lock(userId);
    const [limits, used] = await Promise.all([
      this.usage.limitsFor(userId, tx),
      tx.agents.countForUser(userId),
    ]);
    return { used, limit: limits.agents };
  }

  private async save(
    tx: Repositories,
    userId: string,
    registration: RegistrationRequest,
    allowance: AgentAllowance,
    options: { mailbox: boolean } = { mailbox: true },
  ): Promise<boolean> {
    const { address } = registration;
    const identity = await tx.identities.find(address);
    if (!identity) {
      throw new ForbiddenError(
        `Prove control of ${address} before registering it: GET /v2/identity/${address}/challenge, then POST /v2/identity with the signed challenge`,
      );
    }
    if (identity.user_id !== userId) {
      throw new ConflictError('Agent address is already registered by another account');
    }
    // An external A2A agent's listing is its card's (docs/a2a.md): registering the address as
    // an agent of one's own would give it a mailbox that takes what the A2A agent should.
    if (options.mailbox && (await tx.a2a.findRemote(address)) !== undefined) {
      throw new ConflictError(
        `Agent ${address} is an external A2A agent: change it with POST /v2/a2a/external-agents/${address}/refresh, or delete it`,
      );
    }
    // A proven identity and the listing share one owner: deleting the listing releases it.
    const isNew = (await tx.agents.find(address)) === undefined;
    if (isNew && allowance.used >= allowance.limit) {
      throw new QuotaExceededError(`Agent quota reached ${allowance.used} / ${allowance.limit}`);
    }
    const now = this.clock.now();
    const listing = {
      address,
      user_id: userId,
      name: registration.name,
      handle: registration.handle ?? null,
      redirect_url: registration.url ?? null,
      agent_type: registration.agent_type ?? 'uagent',
      profile: completeProfile(registration.profile),
      endpoints: (registration.endpoints ?? []).map(({ url, weight }) => ({ url, weight })),
      protocols: registration.protocols ?? [],
      metadata: registration.metadata ?? null,
      registered_at: now,
      updated_at: now,
      keep_failed_forwards: registration.keep_failed_forwards,
    };
    // A handle enrolled to another agent is kept for it (docs/enrolments.md).
    if (
      listing.handle !== null &&
      (await tx.enrolments.handleHeldByAnother(listing.handle, address))
    ) {
      throw handleTaken(listing.handle);
    }
    const outcome = await tx.agents.save(listing);
    if (outcome === 'handle-taken') throw handleTaken(registration.handle);
    await tx.search.indexAgent(searchText(listing));
    if (options.mailbox) await tx.mailbox.open({ address, user_id: userId, created_at: now });
    // Registered again, a proxy agent in an outage is worth a try now (at its new URL).
    if (!isNew && listing.redirect_url !== null) await tx.proxy.dueNow([address], now);
    if (isNew) allowance.used += 1;
    return isNew;
  }
}
