import type { ActivityRow, NewActivity } from '../../store/repositories/activity.js';
import type { HostedAgentOrder } from '../../store/repositories/hosting.js';
import type { AgentProfile } from '../../wire/agents.js';
import { HOSTED_STATE_NAMES, LOG_LEVELS, LOG_TYPES } from '../../wire/hosting.js';

/** What hosted agents are made of, as the hosting service takes and answers them, and its bounds. */

export const HOSTED_STATES = HOSTED_STATE_NAMES;
/** What a hosted agent is: `stopped`, `compiling` (starting), `running`, `crashed` (restarting), `failed` (given up). */
export type HostedState = (typeof HOSTED_STATES)[number];
export const HOSTED_LOG_LEVELS = LOG_LEVELS;
export type HostedLogLevel = (typeof HOSTED_LOG_LEVELS)[number];
/** The name the shared contract gives the log level. */
export type LogLevel = HostedLogLevel;
export const HOSTED_LOG_TYPES = LOG_TYPES;
export type HostedLogType = (typeof HOSTED_LOG_TYPES)[number];
export type DesiredState = 'running' | 'stopped';
export type AgentNetwork = 'mainnet' | 'testnet';

/** One file of an agent's code. */
export interface CodeFile {
  name: string;
  value: string;
  language: string;
}

/** Everything a runner needs to start an agent's process. */
export interface HostedRunSpec {
  address: string;
  /** The agent's seed, unsealed: for its process alone. */
  seed: string;
  name: string;
  /** The network it registers on. */
  network: AgentNetwork;
  files: CodeFile[];
  /** The agent's secrets by name, unsealed. */
  secrets: Record<string, string>;
  codeDigest: string;
}

/** What a runner's renewal tells it of each agent it holds. */
export interface HeldAgentState {
  address: string;
  desired: DesiredState;
  codeDigest: string | null;
  network: AgentNetwork;
}

/** A line of output (or a traceback, its lines in one entry) or of the runner's own news about an agent. */
export interface HostedLogLine {
  time: Date;
  level: HostedLogLevel;
  type: HostedLogType;
  entry: string;
  /** A traceback's last line, the exception it ended with (`KeyError: 'x'`). */
  exception?: string;
}

/** A line of an agent's log as kept. */
export interface HostedLogEntry {
  time: number;
  level: HostedLogLevel;
  type: HostedLogType;
  entry: string;
}

/** A hosted agent as its owner sees it (never its seed). */
export interface HostedAgentInfo {
  address: string;
  ownerId: string;
  name: string;
  profile: AgentProfile;
  network: AgentNetwork;
  codeDigest: string | null;
  codeUpdatedAt: number | null;
  revision: number;
  desiredState: DesiredState;
  state: HostedState;
  stateReason: string | null;
  stateChangedAt: number;
  restarts: number;
  createdAt: number;
  updatedAt: number;
}

/** The code as stored: the text as it was put, and when. */
export interface HostedCode {
  code: string | null;
  digest: string | null;
  updatedAt: number | null;
}

/** A secret as its owner sees it: never its value. */
export interface SecretInfo {
  address: string;
  name: string;
  createdAt: number;
}

export interface StoragePage {
  items: { key: string; value: string }[];
  /** The last key of this page, when more may follow. */
  next: string | null;
}

export interface NewHostedAgent {
  name: string;
  readme?: string | null;
  avatar_url?: string | null;
  short_description?: string | null;
  network?: AgentNetwork;
}

export interface HostedAgentUpdates {
  name?: string | null;
  readme?: string | null;
  avatar_url?: string | null;
  short_description?: string | null;
}

export interface HostedAgentListQuery {
  name?: string;
  order: HostedAgentOrder;
  descending: boolean;
  limit: number;
  offset: number;
}

export interface HostingPolicy {
  /** Log lines kept per agent. */
  logLines: number;
  storageKeys: number;
  storageBytes: number;
  /**
   * How long an agent whose code raised runs without an error before its failure ends (the
   * window an error makes its status failing for).
   */
  errorWindowMs: number;
}

/** What records entries on an agent's timeline, and its errors (the activity service). */
export interface HostingTimeline {
  record(rows: NewActivity[]): Promise<void>;
  /** Records rows and answers them as stored (with their ids). */
  recordRows(rows: NewActivity[]): Promise<ActivityRow[]>;
  /** Makes the agent's status failing, for this reason. */
  errored(address: string, message: string | null): Promise<void>;
}

/** Code: files, each file, and all of them together (the text as put). */
export const MAX_CODE_FILES = 50;
export const MAX_CODE_BYTES = 1024 * 1024;
export const MAX_FILE_NAME_LENGTH = 255;
/** The file a hosted agent's code runs. */
export const AGENT_MAIN_FILE = 'agent.py';
export const MAX_SECRETS_PER_AGENT = 100;
export const MAX_SECRET_NAME_LENGTH = 128;
export const MAX_SECRET_BYTES = 64 * 1024;
export const MAX_STORAGE_KEY_LENGTH = 512;
/** The longest log line kept, in characters; longer ones are cut. */
export const MAX_LOG_ENTRY = 4000;
/** The most lines the latest logs answer. */
export const LATEST_LOG_LINES = 1000;
/** A runner not heard of for this long is not counted as live. */
export const RUNNER_LIVE_MS = 30_000;

/**
 * Whether this serving process runs hosted agents, as it found at its start
 * (docs/hosting.md, "Running agents").
 */
export type HostingHere =
  /** It runs them with this interpreter (with uagents installed). */
  | { kind: 'here'; python: string; pythonVersion?: string; uagents?: string }
  /** `agentry runner` processes run them (AGENTRY_HOSTING_RUNNER=separate). */
  | { kind: 'separate' }
  /** It runs none: why, and the one command that changes that. */
  | { kind: 'off'; reason: string; enable: string };

/** Whether hosted agents can run on this deployment, and otherwise how to let them. */
export interface HostingStatus {
  ready: boolean;
  /** Runners alive on this database (this process among them when it is one). */
  runners: number;
  /** The interpreter this process runs agents with, when it does. */
  python: string | undefined;
  /** Why they cannot run, when they cannot. */
  reason: string | undefined;
  /** The one command (or setting) that lets them run, when they cannot. */
  enable: string | undefined;
}

/** The command that makes a hosting key for a deployment that needs it set. */
export const MAKE_HOSTING_KEY = 'AGENTRY_HOSTING_KEY=$(openssl rand -hex 32)';
