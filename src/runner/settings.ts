import type { HostingService } from '../services/hosting/index.js';
import type { SandboxSettings } from './sandbox.js';

/** What the runner asks of the hosting service. */
export type RunnerHosting = Pick<
  HostingService,
  | 'heartbeat'
  | 'claim'
  | 'renew'
  | 'release'
  | 'runSpec'
  | 'setState'
  | 'appendLogs'
  | 'storageGet'
  | 'storageSet'
  | 'storageDelete'
  | 'storageList'
  | 'storageClear'
>;

export interface HostingRunnerOptions {
  /** The URL agents register and are reached by. */
  publicUrl: string;
  /** Where each agent gets its private directory. */
  dir: string;
  maxAgents: number;
  allowRequirements: boolean;
  logLinesPerSecond: number;
  sandbox: SandboxSettings;
  /** How long a claim lasts unless renewed. */
  leaseMs?: number;
  /** How often the runner renews, claims and reconciles. */
  tickMs?: number;
  /** How long a stopped agent has between SIGTERM and SIGKILL. */
  stopGraceMs?: number;
  /** The first wait before a restart after a crash; it doubles at each crash, up to the most. */
  restartBaseMs?: number;
  restartMaxMs?: number;
  /** This many crashes within `crashLoopMs` end in state failed. */
  crashLoopCount?: number;
  crashLoopMs?: number;
  /** How often processes, CPU and disk are looked at. */
  monitorMs?: number;
  diskCheckMs?: number;
  /**
   * Whether agents are held in control groups where the runner may make them; without, CPU
   * is sampled and processes counted (or limited per user).
   */
  controlGroups?: boolean;
  /** An agent above its CPU share on average over this long is stopped (without a control group). */
  cpuWindowMs?: number;
}

/** The runner's settings that its options may leave out. */
export const DEFAULTS = {
  leaseMs: 20_000,
  tickMs: 3_000,
  stopGraceMs: 5_000,
  restartBaseMs: 1_000,
  restartMaxMs: 60_000,
  crashLoopCount: 5,
  crashLoopMs: 120_000,
  monitorMs: 1_000,
  diskCheckMs: 2_000,
  cpuWindowMs: 30_000,
  controlGroups: true,
};

/** The options with every default filled in. */
export type RunnerSettings = Required<HostingRunnerOptions>;
