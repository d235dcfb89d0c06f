import type { ChangeFeed } from '../../infra/change-feed.js';
import type { Clock } from '../../infra/clock.js';
import type { HostingKey } from '../../infra/hosting-key.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';
import type { AgentsService } from '../agents.js';
import { HostingCore } from './core.js';
import type {
  AgentNetwork,
  HostingHere,
  HostingStatus,
  HeldAgentState,
  HostedAgentInfo,
  HostedAgentListQuery,
  HostedAgentUpdates,
  HostedCode,
  HostedLogEntry,
  HostedLogLine,
  HostedRunSpec,
  HostedState,
  HostingPolicy,
  HostingTimeline,
  NewHostedAgent,
  SecretInfo,
  StoragePage,
} from './model.js';
import { OwnerSide } from './owner.js';
import { RunnerSide } from './runners.js';
import { HostingReadiness } from './readiness.js';
import { HostedSecrets } from './secrets.js';
import { HostedStorage } from './storage.js';

export * from './model.js';
export { parseCode } from './checks.js';

/**
 * Hosted agents (docs/hosting.md): Agentry makes an agent's key, keeps it sealed, keeps its
 * code, secrets, storage and logs, and runs it when its owner asks. A hosted agent is an
 * ordinary agent of its owner (a listing with a mailbox, made as if the agent had registered
 * itself), so the registry, mailbox, Almanac, search and timeline apply to it as to any other.
 *
 * The owner's side sets what should be (`desired_state`, the code); runners (the supervisor)
 * hold agents by lease, run those meant to run, and report what is (`state`, logs). Every
 * owner-side call answers 404 for an agent that is not the owner's, as for none at all.
 *
 * This is the service its callers see; its parts, sharing one {@link HostingCore}, are the
 * owner's side (owner.ts), secrets (secrets.ts), storage (storage.ts) and the runners' side
 * (runners.ts).
 */
export class HostingService {
  private readonly core: HostingCore;
  private readonly owner: OwnerSide;
  private readonly secretKeeper: HostedSecrets;
  private readonly storage: HostedStorage;
  private readonly runners: RunnerSide;
  private readonly readiness: HostingReadiness;

  constructor(
    store: Store,
    clock: Clock,
    agents: AgentsService,
    timeline: HostingTimeline,
    key: HostingKey,
    policy: HostingPolicy,
    changes: ChangeFeed,
    logger: Logger,
  ) {
    this.core = new HostingCore(store, clock, agents, timeline, key, policy, changes, logger);
    this.readiness = new HostingReadiness(this.core);
    this.owner = new OwnerSide(this.core, this.readiness);
    this.secretKeeper = new HostedSecrets(this.core);
    this.storage = new HostedStorage(this.core);
    this.runners = new RunnerSide(this.core);
  }

  // ---- Whether hosted agents can run here (readiness.ts) -----------------------------------

  /** Records whether this serving process runs hosted agents, as it found at its start. */
  setHere(here: HostingHere): void {
    this.readiness.set(here);
  }

  /** Whether hosted agents can run here, as this process found at start (and the key allows). */
  localStatus(): Omit<HostingStatus, 'runners'> {
    return this.readiness.local();
  }

  /** Whether hosted agents can run on this deployment now, and otherwise how to let them. */
  status(): Promise<HostingStatus> {
    return this.readiness.status();
  }

  /** Reads (or makes) the hosting key now; the key file's path when this made it. */
  prepareKey(): string | undefined {
    return this.core.key.prepare();
  }

  // ---- The owner's side (owner.ts) ---------------------------------------------------------

  create(ownerId: string, request: NewHostedAgent): Promise<HostedAgentInfo> {
    return this.owner.create(ownerId, request);
  }

  get(ownerId: string, address: string): Promise<HostedAgentInfo> {
    return this.owner.get(ownerId, address);
  }

  profile(ownerId: string, address: string): Promise<HostedAgentInfo & { authorName: string }> {
    return this.owner.profile(ownerId, address);
  }

  list(ownerId: string, query: HostedAgentListQuery): Promise<HostedAgentInfo[]> {
    return this.owner.list(ownerId, query);
  }

  update(ownerId: string, address: string, updates: HostedAgentUpdates): Promise<void> {
    return this.owner.update(ownerId, address, updates);
  }

  delete(ownerId: string, address: string): Promise<void> {
    return this.owner.delete(ownerId, address);
  }

  duplicate(ownerId: string, address: string, request: NewHostedAgent): Promise<HostedAgentInfo> {
    return this.owner.duplicate(ownerId, address, request);
  }

  code(ownerId: string, address: string): Promise<HostedCode> {
    return this.owner.code(ownerId, address);
  }

  setCode(ownerId: string, address: string, code: string): Promise<string> {
    return this.owner.setCode(ownerId, address, code);
  }

  setNetwork(ownerId: string, address: string, network: AgentNetwork): Promise<void> {
    return this.owner.setNetwork(ownerId, address, network);
  }

  start(ownerId: string, address: string): Promise<HostedAgentInfo> {
    return this.owner.start(ownerId, address);
  }

  stop(ownerId: string, address: string): Promise<HostedAgentInfo> {
    return this.owner.stop(ownerId, address);
  }

  latestLogs(ownerId: string, address: string): Promise<HostedLogEntry[]> {
    return this.owner.latestLogs(ownerId, address);
  }

  clearLogs(ownerId: string, address: string): Promise<void> {
    return this.owner.clearLogs(ownerId, address);
  }

  // ---- Secrets (secrets.ts) ----------------------------------------------------------------

  putSecret(
    ownerId: string,
    secret: { address: string; name: string; secret: string },
  ): Promise<SecretInfo> {
    return this.secretKeeper.putSecret(ownerId, secret);
  }

  secrets(ownerId: string): Promise<SecretInfo[]> {
    return this.secretKeeper.secrets(ownerId);
  }

  agentSecrets(ownerId: string, address: string): Promise<SecretInfo[]> {
    return this.secretKeeper.agentSecrets(ownerId, address);
  }

  deleteSecret(ownerId: string, address: string, name: string): Promise<void> {
    return this.secretKeeper.deleteSecret(ownerId, address, name);
  }

  // ---- Storage, for the owner (storage.ts) -------------------------------------------------

  ownerStorageList(
    ownerId: string,
    address: string,
    after: string | undefined,
  ): Promise<StoragePage> {
    return this.storage.ownerStorageList(ownerId, address, after);
  }

  ownerStorageGet(ownerId: string, address: string, key: string): Promise<string> {
    return this.storage.ownerStorageGet(ownerId, address, key);
  }

  ownerStorageSet(ownerId: string, address: string, key: string, value: string): Promise<void> {
    return this.storage.ownerStorageSet(ownerId, address, key, value);
  }

  ownerStorageDelete(ownerId: string, address: string, key: string): Promise<void> {
    return this.storage.ownerStorageDelete(ownerId, address, key);
  }

  // ---- Storage, for the agent through its runner (storage.ts) ------------------------------

  storageGet(address: string, key: string): Promise<string | undefined> {
    return this.storage.storageGet(address, key);
  }

  storageSet(address: string, key: string, value: string): Promise<void> {
    return this.storage.storageSet(address, key, value);
  }

  storageDelete(address: string, key: string): Promise<boolean> {
    return this.storage.storageDelete(address, key);
  }

  storageList(address: string, after?: string, limit?: number): Promise<StoragePage> {
    return this.storage.storageList(address, after, limit);
  }

  storageClear(address: string): Promise<number> {
    return this.storage.storageClear(address);
  }

  // ---- The runners' side (runners.ts) ------------------------------------------------------

  heartbeat(runnerId: string, host: string, capacity: number): Promise<void> {
    return this.runners.heartbeat(runnerId, host, capacity);
  }

  liveRunnerCount(): Promise<number> {
    return this.core.liveRunnerCount();
  }

  claim(runnerId: string, max: number, leaseMs: number): Promise<string[]> {
    return this.runners.claim(runnerId, max, leaseMs);
  }

  renew(runnerId: string, leaseMs: number): Promise<HeldAgentState[]> {
    return this.runners.renew(runnerId, leaseMs);
  }

  release(runnerId: string, address: string): Promise<void> {
    return this.runners.release(runnerId, address);
  }

  runSpec(address: string): Promise<HostedRunSpec> {
    return this.runners.runSpec(address);
  }

  setState(
    address: string,
    state: HostedState,
    reason: string | null,
    restarts?: number,
  ): Promise<void> {
    return this.runners.setState(address, state, reason, restarts);
  }

  appendLogs(address: string, lines: HostedLogLine[]): Promise<void> {
    return this.runners.appendLogs(address, lines);
  }

  /**
   * Ends the failures of agents that have run without an error for the error window (a
   * housekeeping task); how many ended.
   */
  endQuietFailures(): Promise<number> {
    return this.runners.endQuietFailures();
  }
}
