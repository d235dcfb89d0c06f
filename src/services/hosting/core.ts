import type { ChangeFeed } from '../../infra/change-feed.js';
import type { Clock } from '../../infra/clock.js';
import type { HostingKey } from '../../infra/hosting-key.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';
import type { HostedAgentListed, HostedAgentRow } from '../../store/repositories/hosting.js';
import { NotFoundError } from '../../errors.js';
import type { AgentProfile } from '../../wire/agents.js';
import { completeProfile, type AgentsService } from '../agents.js';
import { storableEntry } from './checks.js';
import { HostedFailures } from './failures.js';
import {
  RUNNER_LIVE_MS,
  type AgentNetwork,
  type DesiredState,
  type HostedAgentInfo,
  type HostedState,
  type HostingPolicy,
  type HostingTimeline,
} from './model.js';

/**
 * What every part of the hosting service shares: the store, the clock, the sealing key, the
 * policy, the timeline, the change feed its owners' changes go to, the logger, and the rules more than one part
 * applies (whose an agent is, whether a live runner holds it, how its state changes).
 */
export class HostingCore {
  /** The agents' failures: their errors and crashes, grouped (failures.ts). */
  readonly failures: HostedFailures;

  constructor(
    readonly store: Store,
    readonly clock: Clock,
    readonly agents: AgentsService,
    readonly timeline: HostingTimeline,
    readonly key: HostingKey,
    readonly policy: HostingPolicy,
    private readonly changes: ChangeFeed,
    readonly logger: Logger,
  ) {
    this.failures = new HostedFailures(this);
  }

  /**
   * Tells the runners, after the commit, that an owner changed what should run (an agent to
   * start or stop, new code, a deletion): they look at once instead of at their next round.
   */
  changed(): void {
    void this.changes.publish([{ kind: 'hosting.changed' }]);
  }

  /** Runners heard of in the last {@link RUNNER_LIVE_MS}. */
  liveRunnerCount(): Promise<number> {
    return this.store.repos.hosting.countRunnersSeenSince(this.clock.now() - RUNNER_LIVE_MS);
  }

  /** Whether a runner holds the agent by a lease that has not run out. */
  heldByLiveRunner(row: HostedAgentRow): boolean {
    return row.runner_id !== null && Number(row.lease_expires_at) > this.clock.now();
  }

  /** The owner's agent; 404 for one that is not the owner's, as for none at all. */
  async owned(ownerId: string, address: string): Promise<HostedAgentListed> {
    const row = await this.store.repos.hosting.findListed(address, ownerId);
    if (!row) throw notFound(address);
    return row;
  }

  /**
   * Sets the state; a change of state or reason is recorded on the agent's timeline. A crash or
   * a failure to start (`crashed`, `failed`) opens the agent's failure or adds to it: a crash
   * loop is one timeline row, updated in place, not one per crash (failures.ts).
   */
  async changeState(row: HostedAgentRow, state: HostedState, reason: string | null): Promise<void> {
    const now = this.clock.now();
    const text = reason === null ? null : storableEntry(reason);
    if (row.state === state && row.state_reason === text) return;
    const changed = await this.store.repos.hosting.update(row.address, {
      state,
      state_reason: text,
      state_changed_at: now,
    });
    if (!changed) return;
    const message = `Hosted agent ${state}${text === null ? '' : `: ${text}`}`;
    if (state === 'crashed' || state === 'failed') {
      await this.failures.crashed(row.address, {
        at: now,
        state,
        reason: text,
        previous: row.state,
        message,
      });
      return;
    }
    await this.timeline.record([
      {
        address: row.address,
        kind: 'event.info',
        at: now,
        category: 'system',
        message,
        data: JSON.stringify({ hosted: { state, reason: text, previous: row.state } }),
      },
    ]);
  }
}

/** What a sealed value is bound to: its kind, its agent and (a secret's) its name. */
export function sealContext(kind: 'seed' | 'secret', address: string, name = ''): string {
  return `${kind}:${address}:${name}`;
}

/** A hosted agent's row as its owner sees it. */
export function info(row: HostedAgentListed): HostedAgentInfo {
  return {
    address: row.address,
    ownerId: row.owner_id,
    name: row.name,
    profile: completeProfile(JSON.parse(row.profile) as Partial<AgentProfile>),
    network: row.network as AgentNetwork,
    codeDigest: row.code_digest,
    codeUpdatedAt: row.code_updated_at === null ? null : Number(row.code_updated_at),
    revision: Number(row.revision),
    desiredState: row.desired_state as DesiredState,
    state: row.state as HostedState,
    stateReason: row.state_reason,
    stateChangedAt: Number(row.state_changed_at),
    restarts: Number(row.restarts),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

export function notFound(address: string): NotFoundError {
  return new NotFoundError(`Hosted agent ${address} not found`);
}
