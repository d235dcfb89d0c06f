import { randomBytes } from 'node:crypto';
import { agentAddressFromSeed, seal, sha256Hex } from '../../crypto/index.js';
import { ConflictError } from '../../errors.js';
import type { HostedAgentChanges, HostedLogRow } from '../../store/repositories/hosting.js';
import { parseCode } from './checks.js';
import { info, sealContext, type HostingCore } from './core.js';
import type { HostingReadiness } from './readiness.js';
import {
  LATEST_LOG_LINES,
  type AgentNetwork,
  type HostedAgentInfo,
  type HostedAgentListQuery,
  type HostedAgentUpdates,
  type HostedCode,
  type HostedLogEntry,
  type HostedLogLevel,
  type HostedLogType,
  type NewHostedAgent,
} from './model.js';

/**
 * The owner's side of hosted agents: making, reading, changing, duplicating and deleting them,
 * their code and network, asking for them to start or stop, and their logs. Every call answers
 * 404 for an agent that is not the owner's, as for none at all.
 */
export class OwnerSide {
  constructor(
    private readonly core: HostingCore,
    private readonly readiness: HostingReadiness,
  ) {}

  /**
   * Makes a new agent for the owner: a fresh seed (sealed at once), its listing and mailbox,
   * and its hosting row, stopped and without code.
   */
  async create(ownerId: string, request: NewHostedAgent): Promise<HostedAgentInfo> {
    const key = this.core.key.get();
    const seed = randomBytes(32).toString('hex');
    const address = agentAddressFromSeed(seed, 0);
    await this.core.agents.registerSelf(ownerId, {
      address,
      name: request.name,
      agent_type: 'uagent',
      profile: {
        description: request.short_description ?? '',
        readme: request.readme ?? '',
        avatar_url: request.avatar_url ?? '',
      },
    });
    const now = this.core.clock.now();
    try {
      await this.core.store.repos.hosting.insert({
        address,
        owner_id: ownerId,
        network: request.network ?? 'testnet',
        seed_ciphertext: seal(key, seed, sealContext('seed', address)),
        code: null,
        code_digest: null,
        code_updated_at: null,
        revision: 0,
        desired_state: 'stopped',
        state: 'stopped',
        state_reason: null,
        state_changed_at: now,
        runner_id: null,
        lease_expires_at: null,
        restarts: 0,
        created_at: now,
      });
    } catch (err) {
      await this.core.agents.delete(ownerId, address);
      throw err;
    }
    return this.get(ownerId, address);
  }

  async get(ownerId: string, address: string): Promise<HostedAgentInfo> {
    return info(await this.core.owned(ownerId, address));
  }

  /** The agent with the name of its owner's account (a team's is `team:<slug>`). */
  async profile(
    ownerId: string,
    address: string,
  ): Promise<HostedAgentInfo & { authorName: string }> {
    const agent = await this.get(ownerId, address);
    const owner = await this.core.store.repos.users.findById(ownerId);
    return { ...agent, authorName: owner?.name ?? '' };
  }

  async list(ownerId: string, query: HostedAgentListQuery): Promise<HostedAgentInfo[]> {
    return (await this.core.store.repos.hosting.listForOwner(ownerId, query)).map(info);
  }

  /** Changes the name and the profile fields given (null or left out keeps what is stored). */
  async update(ownerId: string, address: string, updates: HostedAgentUpdates): Promise<void> {
    const current = await this.get(ownerId, address);
    await this.core.agents.update(ownerId, {
      address,
      name: updates.name ?? undefined,
      profile: {
        ...current.profile,
        readme: updates.readme ?? current.profile.readme,
        avatar_url: updates.avatar_url ?? current.profile.avatar_url,
        description: updates.short_description ?? current.profile.description,
      },
    });
    await this.core.store.repos.hosting.bumpRevision(address);
  }

  /**
   * Deletes the agent: its listing, mailbox and history as `DELETE /v2/agents/{address}` does,
   * and with them (the rows go with the listing) its seed, code, secrets, storage and logs. A
   * runner that held it finds it gone at its next renewal and stops its process.
   */
  async delete(ownerId: string, address: string): Promise<void> {
    await this.core.owned(ownerId, address);
    await this.core.agents.delete(ownerId, address);
    this.core.changed();
  }

  /**
   * A new agent of the owner with the request's name, profile and network, and a copy of the
   * code (not of the secrets or the storage).
   */
  async duplicate(
    ownerId: string,
    address: string,
    request: NewHostedAgent,
  ): Promise<HostedAgentInfo> {
    const source = await this.core.owned(ownerId, address);
    const copy = await this.create(ownerId, request);
    if (source.code !== null) {
      await this.core.store.repos.hosting.update(copy.address, {
        code: source.code,
        code_digest: source.code_digest,
        code_updated_at: this.core.clock.now(),
        revision: 1,
      });
    }
    return this.get(ownerId, copy.address);
  }

  async code(ownerId: string, address: string): Promise<HostedCode> {
    const row = await this.core.owned(ownerId, address);
    return {
      code: row.code,
      digest: row.code_digest,
      updatedAt: row.code_updated_at === null ? null : Number(row.code_updated_at),
    };
  }

  /**
   * Replaces the code (checked by {@link parseCode}) and answers its digest. A running agent
   * is restarted with it by its runner, which sees the digest change.
   */
  async setCode(ownerId: string, address: string, code: string): Promise<string> {
    parseCode(code);
    await this.core.owned(ownerId, address);
    const digest = sha256Hex(code);
    const now = this.core.clock.now();
    await this.core.store.transaction(async (tx) => {
      await tx.hosting.bumpRevision(address, {
        code,
        code_digest: digest,
        code_updated_at: now,
      });
      await tx.agents.update(address, { updated_at: now });
    });
    this.core.changed();
    return digest;
  }

  /** Sets the network the agent registers on; a running agent is restarted on it by its runner. */
  async setNetwork(ownerId: string, address: string, network: AgentNetwork): Promise<void> {
    const row = await this.core.owned(ownerId, address);
    if (row.network === network) return;
    await this.core.store.repos.hosting.update(address, { network });
    this.core.changed();
  }

  /**
   * Asks for the agent to run (409 without code). An agent that is running, starting or
   * restarting goes on; one that stopped or failed is let go by any runner that still holds
   * it, so that the next to claim it starts it afresh.
   */
  async start(ownerId: string, address: string): Promise<HostedAgentInfo> {
    const row = await this.core.owned(ownerId, address);
    if (row.code === null) {
      throw new ConflictError(
        `Hosted agent ${address} has no code yet: save its code (an agent.py) before starting it`,
      );
    }
    const live = row.state === 'running' || row.state === 'compiling' || row.state === 'crashed';
    // Held by a live runner, and not given up on: it is being started already.
    const starting = row.state !== 'failed' && this.core.heldByLiveRunner(row);
    if (row.desired_state === 'running' && (live || starting)) return info(row);
    const changes: HostedAgentChanges = { desired_state: 'running', restarts: 0 };
    if (!live) {
      const status = await this.readiness.status();
      Object.assign(changes, { runner_id: null, lease_expires_at: null });
      await this.core.store.repos.hosting.update(address, changes);
      await this.core.changeState(
        row,
        'stopped',
        status.ready
          ? 'Waiting for a runner to start it'
          : `Waiting for a runner: none is running (${status.reason}; to run hosted agents: ${status.enable})`,
      );
    } else {
      await this.core.store.repos.hosting.update(address, changes);
    }
    this.core.changed();
    return this.get(ownerId, address);
  }

  /**
   * Asks for the agent to stop. A runner that holds it stops its process and says so; one that
   * no live runner holds is stopped at once.
   */
  async stop(ownerId: string, address: string): Promise<HostedAgentInfo> {
    const row = await this.core.owned(ownerId, address);
    await this.core.store.repos.hosting.update(address, { desired_state: 'stopped' });
    if (!this.core.heldByLiveRunner(row)) {
      await this.core.store.repos.hosting.update(address, {
        runner_id: null,
        lease_expires_at: null,
      });
      await this.core.changeState(row, 'stopped', 'Stopped by its owner');
    }
    this.core.changed();
    return this.get(ownerId, address);
  }

  /** The newest log lines (at most {@link LATEST_LOG_LINES}), oldest first. */
  async latestLogs(ownerId: string, address: string): Promise<HostedLogEntry[]> {
    await this.core.owned(ownerId, address);
    const rows = await this.core.store.repos.hosting.latestLogs(address, LATEST_LOG_LINES);
    return rows.map((row: HostedLogRow) => ({
      time: Number(row.time),
      level: row.level as HostedLogLevel,
      type: row.type as HostedLogType,
      entry: row.entry,
    }));
  }

  async clearLogs(ownerId: string, address: string): Promise<void> {
    await this.core.owned(ownerId, address);
    await this.core.store.repos.hosting.clearLogs(address);
  }
}
