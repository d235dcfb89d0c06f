import { randomBytes } from 'node:crypto';
import { agentAddressFromSeed, seal, sha256Hex, unseal } from '../../crypto/index.js';
import {
  ConflictError,
  NotFoundError,
  PayloadTooLargeError,
  RequestValidationError,
  type ValidationIssue,
} from '../../errors.js';
import type { Clock } from '../../infra/clock.js';
import type { HostingKey } from '../../infra/hosting-key.js';
import type { Store } from '../../store/index.js';
import type { NewActivity } from '../../store/repositories/activity.js';
import type {
  HostedAgentChanges,
  HostedAgentListed,
  HostedAgentOrder,
  HostedAgentRow,
  HostedLogRow,
} from '../../store/repositories/hosting.js';
import type { AgentProfile } from '../../wire/agents.js';
import { HOSTED_STATE_NAMES, LOG_LEVELS, LOG_TYPES } from '../../wire/hosting.js';
import { completeProfile, type AgentsService } from '../agents.js';

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
}

/** A line of output or of the runner's own news about an agent. */
export interface HostedLogLine {
  time: Date;
  level: HostedLogLevel;
  type: HostedLogType;
  entry: string;
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
}

/** What records entries on an agent's timeline, and its errors (the activity service). */
export interface HostingTimeline {
  record(rows: NewActivity[]): Promise<void>;
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
/** A runner not heard of for this long is forgotten. */
const RUNNER_FORGET_MS = 24 * 3600_000;
const STORAGE_PAGE = 100;

const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const FILE_SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
/** What the runner sets in an agent's environment: a secret may not take its names. */
const RESERVED_SECRET_PREFIX = /^AGENTRY_/i;
/**
 * Text no store keeps as it is: a NUL character (PostgreSQL refuses it) or a lone UTF-16
 * surrogate (it has no UTF-8 form).
 */
const UNSTORABLE_SOURCE =
  '\\u0000|[\\ud800-\\udbff](?![\\udc00-\\udfff])|(?<![\\ud800-\\udbff])[\\udc00-\\udfff]';
const UNSTORABLE = new RegExp(UNSTORABLE_SOURCE);
const UNSTORABLE_ALL = new RegExp(UNSTORABLE_SOURCE, 'g');

function sealContext(kind: 'seed' | 'secret', address: string, name = ''): string {
  return `${kind}:${address}:${name}`;
}

function invalid(loc: (string | number)[], msg: string, input?: unknown): RequestValidationError {
  const issue: ValidationIssue = { loc, msg, type: 'value_error' };
  if (input !== undefined) issue.input = input;
  return new RequestValidationError([issue]);
}

/**
 * Why a file name is refused, or undefined when it is a safe relative name: words of letters,
 * digits, `_`, `.` and `-` separated by `/`, none empty, hidden (a leading dot) or `..`.
 */
function fileNameProblem(name: string): string | undefined {
  if (name.length === 0 || name.length > MAX_FILE_NAME_LENGTH) {
    return `a file name has 1 to ${MAX_FILE_NAME_LENGTH} characters`;
  }
  if (name.startsWith('/')) return 'a file name is relative (no leading /)';
  for (const segment of name.split('/')) {
    if (!FILE_SEGMENT.test(segment)) {
      return 'a file name is words of letters, digits, "_", "." and "-" separated by "/", none empty or starting with "." (no hidden files, no "..")';
    }
  }
  return undefined;
}

/**
 * Parses and checks the code as the Hosting API takes it: a JSON string of a list of 1 to 50
 * files `{name, value, language}` with safe, distinct relative names, one of them `agent.py`,
 * in all at most 1 MiB. Answers the files; a 422 naming the problem otherwise.
 */
export function parseCode(code: string): CodeFile[] {
  const loc = ['body', 'code'];
  if (Buffer.byteLength(code, 'utf8') > MAX_CODE_BYTES) {
    throw invalid(loc, `The code must be at most ${MAX_CODE_BYTES} bytes (1 MiB) in all`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(code);
  } catch {
    throw invalid(
      loc,
      'The code must be a JSON string of a list of files: [{"name": "agent.py", "value": "…", "language": "python"}]',
    );
  }
  if (!Array.isArray(parsed)) {
    throw invalid(loc, 'The code must be a JSON list of files, each {"name", "value", "language"}');
  }
  if (parsed.length === 0 || parsed.length > MAX_CODE_FILES) {
    throw invalid(loc, `The code must hold 1 to ${MAX_CODE_FILES} files (got ${parsed.length})`);
  }
  const names = new Set<string>();
  const files = parsed.map((item: unknown, index): CodeFile => {
    const at = [...loc, index];
    if (typeof item !== 'object' || item === null || Array.isArray(item)) {
      throw invalid(at, 'Each file is an object {"name", "value", "language"}');
    }
    const { name, value, language } = item as Record<string, unknown>;
    if (typeof name !== 'string') throw invalid([...at, 'name'], 'A file needs a name (text)');
    if (typeof value !== 'string') {
      throw invalid([...at, 'value'], `File "${name.slice(0, 64)}" needs a value (text)`);
    }
    if (language !== undefined && typeof language !== 'string') {
      throw invalid([...at, 'language'], 'A file’s language is text, such as "python"');
    }
    const problem = fileNameProblem(name);
    if (problem !== undefined) {
      throw invalid([...at, 'name'], `Bad file name "${name.slice(0, 64)}": ${problem}`);
    }
    if (names.has(name)) throw invalid([...at, 'name'], `Two files are named "${name}"`);
    names.add(name);
    if (UNSTORABLE.test(value)) {
      throw invalid([...at, 'value'], `File "${name}" holds a NUL character or a lone surrogate`);
    }
    return { name, value, language: (language ?? 'python').slice(0, 32) };
  });
  if (!names.has(AGENT_MAIN_FILE)) {
    throw invalid(loc, `The code must have a file named "${AGENT_MAIN_FILE}": it is what runs`);
  }
  return files;
}

/** Checks a secret's name: a Python identifier, not one of the names the runner sets. */
function checkSecretName(name: string, loc: (string | number)[]): void {
  if (name.length > MAX_SECRET_NAME_LENGTH || !SECRET_NAME.test(name)) {
    throw invalid(
      loc,
      `A secret's name must be a Python identifier (letters, digits and "_", not starting with a digit, at most ${MAX_SECRET_NAME_LENGTH} characters)`,
      name,
    );
  }
  if (RESERVED_SECRET_PREFIX.test(name)) {
    throw invalid(loc, 'Names starting with AGENTRY_ are the runner’s own; choose another', name);
  }
}

function checkStorageKey(key: string): void {
  if (key.length === 0 || key.length > MAX_STORAGE_KEY_LENGTH || UNSTORABLE.test(key)) {
    throw invalid(
      ['path', 'key'],
      `A storage key has 1 to ${MAX_STORAGE_KEY_LENGTH} characters, none of them NUL or a lone surrogate`,
    );
  }
}

/** A log line as stored: bounded, and only text every store keeps. */
function storableEntry(entry: string): string {
  const clean = entry.replace(UNSTORABLE_ALL, '\uFFFD');
  return clean.length > MAX_LOG_ENTRY ? `${clean.slice(0, MAX_LOG_ENTRY - 1)}…` : clean;
}

function info(row: HostedAgentListed): HostedAgentInfo {
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

function notFound(address: string): NotFoundError {
  return new NotFoundError(`Hosted agent ${address} not found`);
}

/**
 * Hosted agents (docs/hosting.md): Agentry makes an agent's key, keeps it sealed, keeps its
 * code, secrets, storage and logs, and runs it when its owner asks. A hosted agent is an
 * ordinary agent of its owner (a listing with a mailbox, made as if the agent had registered
 * itself), so the registry, mailbox, Almanac, search and timeline apply to it as to any other.
 *
 * The owner's side sets what should be (`desired_state`, the code); runners (the supervisor)
 * hold agents by lease, run those meant to run, and report what is (`state`, logs). Every
 * owner-side call answers 404 for an agent that is not the owner's, as for none at all.
 */
export class HostingService {
  /** Told when an owner changes what should run: this process's runner looks at once. */
  private readonly changeListeners = new Set<() => void>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly agents: AgentsService,
    private readonly timeline: HostingTimeline,
    private readonly key: HostingKey,
    private readonly policy: HostingPolicy,
  ) {}

  /**
   * Calls `listener` whenever an owner asks, through this process, for an agent to start or
   * stop, gives it new code or deletes it; answers the call that stops listening. A runner of
   * this process acts on it at once instead of at its next round (runners elsewhere see it at
   * theirs).
   */
  onChange(listener: () => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  private changed(): void {
    for (const listener of this.changeListeners) listener();
  }

  // ---- The owner's side ------------------------------------------------------------------

  /**
   * Makes a new agent for the owner: a fresh seed (sealed at once), its listing and mailbox,
   * and its hosting row, stopped and without code.
   */
  async create(ownerId: string, request: NewHostedAgent): Promise<HostedAgentInfo> {
    const key = this.key.get();
    const seed = randomBytes(32).toString('hex');
    const address = agentAddressFromSeed(seed, 0);
    await this.agents.registerSelf(ownerId, {
      address,
      name: request.name,
      agent_type: 'uagent',
      profile: {
        description: request.short_description ?? '',
        readme: request.readme ?? '',
        avatar_url: request.avatar_url ?? '',
      },
    });
    const now = this.clock.now();
    try {
      await this.store.repos.hosting.insert({
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
      await this.agents.delete(ownerId, address);
      throw err;
    }
    return this.get(ownerId, address);
  }

  async get(ownerId: string, address: string): Promise<HostedAgentInfo> {
    return info(await this.owned(ownerId, address));
  }

  /** The agent with the name of its owner's account (a team's is `team:<slug>`). */
  async profile(
    ownerId: string,
    address: string,
  ): Promise<HostedAgentInfo & { authorName: string }> {
    const agent = await this.get(ownerId, address);
    const owner = await this.store.repos.users.findById(ownerId);
    return { ...agent, authorName: owner?.name ?? '' };
  }

  async list(ownerId: string, query: HostedAgentListQuery): Promise<HostedAgentInfo[]> {
    return (await this.store.repos.hosting.listForOwner(ownerId, query)).map(info);
  }

  /** Changes the name and the profile fields given (null or left out keeps what is stored). */
  async update(ownerId: string, address: string, updates: HostedAgentUpdates): Promise<void> {
    const current = await this.get(ownerId, address);
    await this.agents.update(ownerId, {
      address,
      name: updates.name ?? undefined,
      profile: {
        ...current.profile,
        readme: updates.readme ?? current.profile.readme,
        avatar_url: updates.avatar_url ?? current.profile.avatar_url,
        description: updates.short_description ?? current.profile.description,
      },
    });
    await this.store.repos.hosting.bumpRevision(address);
  }

  /**
   * Deletes the agent: its listing, mailbox and history as `DELETE /v2/agents/{address}` does,
   * and with them (the rows go with the listing) its seed, code, secrets, storage and logs. A
   * runner that held it finds it gone at its next renewal and stops its process.
   */
  async delete(ownerId: string, address: string): Promise<void> {
    await this.owned(ownerId, address);
    await this.agents.delete(ownerId, address);
    this.changed();
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
    const source = await this.owned(ownerId, address);
    const copy = await this.create(ownerId, request);
    if (source.code !== null) {
      await this.store.repos.hosting.update(copy.address, {
        code: source.code,
        code_digest: source.code_digest,
        code_updated_at: this.clock.now(),
        revision: 1,
      });
    }
    return this.get(ownerId, copy.address);
  }

  async code(ownerId: string, address: string): Promise<HostedCode> {
    const row = await this.owned(ownerId, address);
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
    await this.owned(ownerId, address);
    const digest = sha256Hex(code);
    const now = this.clock.now();
    await this.store.transaction(async (tx) => {
      await tx.hosting.bumpRevision(address, {
        code,
        code_digest: digest,
        code_updated_at: now,
      });
      await tx.agents.update(address, { updated_at: now });
    });
    this.changed();
    return digest;
  }

  /** Sets the network the agent registers on. */
  async setNetwork(ownerId: string, address: string, network: AgentNetwork): Promise<void> {
    await this.owned(ownerId, address);
    await this.store.repos.hosting.update(address, { network });
  }

  /**
   * Asks for the agent to run (409 without code). An agent that is running, starting or
   * restarting goes on; one that stopped or failed is let go by any runner that still holds
   * it, so that the next to claim it starts it afresh.
   */
  async start(ownerId: string, address: string): Promise<HostedAgentInfo> {
    const row = await this.owned(ownerId, address);
    if (row.code === null) {
      throw new ConflictError(
        `Hosted agent ${address} has no code yet: put its code first (PUT /v1/hosting/agents/${address}/code)`,
      );
    }
    const live = row.state === 'running' || row.state === 'compiling' || row.state === 'crashed';
    // Held by a live runner, and not given up on: it is being started already.
    const starting = row.state !== 'failed' && this.heldByLiveRunner(row);
    if (row.desired_state === 'running' && (live || starting)) return info(row);
    const changes: HostedAgentChanges = { desired_state: 'running', restarts: 0 };
    if (!live) {
      const runners = await this.liveRunnerCount();
      Object.assign(changes, { runner_id: null, lease_expires_at: null });
      await this.store.repos.hosting.update(address, changes);
      await this.changeState(
        row,
        'stopped',
        runners === 0
          ? 'Waiting for a runner: none is running (the operator sets AGENTRY_HOSTING_PYTHON, or starts "agentry runner")'
          : 'Waiting for a runner to start it',
      );
    } else {
      await this.store.repos.hosting.update(address, changes);
    }
    this.changed();
    return this.get(ownerId, address);
  }

  /**
   * Asks for the agent to stop. A runner that holds it stops its process and says so; one that
   * no live runner holds is stopped at once.
   */
  async stop(ownerId: string, address: string): Promise<HostedAgentInfo> {
    const row = await this.owned(ownerId, address);
    await this.store.repos.hosting.update(address, { desired_state: 'stopped' });
    if (!this.heldByLiveRunner(row)) {
      await this.store.repos.hosting.update(address, { runner_id: null, lease_expires_at: null });
      await this.changeState(row, 'stopped', 'Stopped by its owner');
    }
    this.changed();
    return this.get(ownerId, address);
  }

  /** The newest log lines (at most {@link LATEST_LOG_LINES}), oldest first. */
  async latestLogs(ownerId: string, address: string): Promise<HostedLogEntry[]> {
    await this.owned(ownerId, address);
    const rows = await this.store.repos.hosting.latestLogs(address, LATEST_LOG_LINES);
    return rows.map((row: HostedLogRow) => ({
      time: Number(row.time),
      level: row.level as HostedLogLevel,
      type: row.type as HostedLogType,
      entry: row.entry,
    }));
  }

  async clearLogs(ownerId: string, address: string): Promise<void> {
    await this.owned(ownerId, address);
    await this.store.repos.hosting.clearLogs(address);
  }

  // ---- Secrets ---------------------------------------------------------------------------

  /** Sets a secret of the owner's agent (replacing one of the same name); never answers it. */
  async putSecret(
    ownerId: string,
    secret: { address: string; name: string; secret: string },
  ): Promise<SecretInfo> {
    const { address, name } = secret;
    checkSecretName(name, ['body', 'name']);
    if (Buffer.byteLength(secret.secret, 'utf8') > MAX_SECRET_BYTES) {
      throw invalid(['body', 'secret'], `A secret is at most ${MAX_SECRET_BYTES} bytes`);
    }
    const key = this.key.get();
    await this.owned(ownerId, address);
    const now = this.clock.now();
    await this.store.transaction(async (tx) => {
      await tx.hosting.lock(address);
      const existing = await tx.hosting.secrets(address);
      if (existing.length >= MAX_SECRETS_PER_AGENT && !existing.some((row) => row.name === name)) {
        throw new ConflictError(
          `An agent has at most ${MAX_SECRETS_PER_AGENT} secrets; delete one first`,
        );
      }
      await tx.hosting.putSecret({
        address,
        name,
        ciphertext: seal(key, secret.secret, sealContext('secret', address, name)),
        created_at: now,
      });
    });
    return { address, name, createdAt: now };
  }

  /** Every secret of the owner's hosted agents. */
  async secrets(ownerId: string): Promise<SecretInfo[]> {
    return (await this.store.repos.hosting.secretsOfOwner(ownerId)).map((row) => ({
      address: row.address,
      name: row.name,
      createdAt: Number(row.created_at),
    }));
  }

  async agentSecrets(ownerId: string, address: string): Promise<SecretInfo[]> {
    await this.owned(ownerId, address);
    return (await this.store.repos.hosting.secrets(address)).map((row) => ({
      address: row.address,
      name: row.name,
      createdAt: Number(row.created_at),
    }));
  }

  async deleteSecret(ownerId: string, address: string, name: string): Promise<void> {
    await this.owned(ownerId, address);
    if (!(await this.store.repos.hosting.deleteSecret(address, name))) {
      throw new NotFoundError(`Hosted agent ${address} has no secret "${name.slice(0, 128)}"`);
    }
  }

  // ---- Storage, for the owner (over HTTP) ------------------------------------------------

  async ownerStorageList(
    ownerId: string,
    address: string,
    after: string | undefined,
  ): Promise<StoragePage> {
    await this.owned(ownerId, address);
    return this.storageList(address, after);
  }

  async ownerStorageGet(ownerId: string, address: string, key: string): Promise<string> {
    await this.owned(ownerId, address);
    const value = await this.storageGet(address, key);
    if (value === undefined) throw new NotFoundError(`No storage key "${key.slice(0, 128)}"`);
    return value;
  }

  async ownerStorageSet(ownerId: string, address: string, key: string, value: string) {
    await this.owned(ownerId, address);
    await this.storageSet(address, key, value);
  }

  async ownerStorageDelete(ownerId: string, address: string, key: string): Promise<void> {
    await this.owned(ownerId, address);
    if (!(await this.storageDelete(address, key))) {
      throw new NotFoundError(`No storage key "${key.slice(0, 128)}"`);
    }
  }

  // ---- Storage (the agent's ctx.storage, through its runner; the owner's calls above) -----

  async storageGet(address: string, key: string): Promise<string | undefined> {
    checkStorageKey(key);
    return this.store.repos.hosting.storageGet(address, key);
  }

  /**
   * Sets a key, within the agent's bounds (keys, and bytes of keys and values together):
   * past them, 413 saying which. 404 when the agent is gone.
   */
  async storageSet(address: string, key: string, value: string): Promise<void> {
    checkStorageKey(key);
    if (UNSTORABLE.test(value)) {
      throw invalid(
        ['body', 'value'],
        'A stored value may not hold a NUL character or a lone surrogate',
      );
    }
    const { storageKeys, storageBytes } = this.policy;
    const adds = Buffer.byteLength(key, 'utf8') + Buffer.byteLength(value, 'utf8');
    if (adds > storageBytes) {
      throw new PayloadTooLargeError(
        `An agent's storage holds at most ${storageBytes} bytes of keys and values; this one alone is ${adds}`,
      );
    }
    await this.store.transaction(async (tx) => {
      if (!(await tx.hosting.lock(address))) throw notFound(address);
      const others = await tx.hosting.storageUsage(address, key);
      if (others.keys >= storageKeys && (await tx.hosting.storageGet(address, key)) === undefined) {
        throw new PayloadTooLargeError(
          `An agent's storage holds at most ${storageKeys} keys; delete some first`,
        );
      }
      if (others.bytes + adds > storageBytes) {
        throw new PayloadTooLargeError(
          `An agent's storage holds at most ${storageBytes} bytes of keys and values; ${others.bytes} are used by other keys, and this one needs ${adds}`,
        );
      }
      await tx.hosting.storageSet({ address, key, value, updated_at: this.clock.now() });
    });
  }

  /** Deletes a key; says whether it was there. */
  async storageDelete(address: string, key: string): Promise<boolean> {
    checkStorageKey(key);
    return this.store.repos.hosting.storageDelete(address, key);
  }

  /** A page of the agent's storage in key order, after the key `after` when given. */
  async storageList(address: string, after?: string, limit = STORAGE_PAGE): Promise<StoragePage> {
    const items = await this.store.repos.hosting.storagePage(address, after, limit + 1);
    const more = items.length > limit;
    const page = more ? items.slice(0, limit) : items;
    return { items: page, next: more ? page[page.length - 1]!.key : null };
  }

  /** Empties the agent's storage; answers how many keys went. */
  storageClear(address: string): Promise<number> {
    return this.store.repos.hosting.storageClear(address);
  }

  // ---- The runners' side -----------------------------------------------------------------

  /** Records that the runner is alive, with how many agents it runs at most. */
  async heartbeat(runnerId: string, host: string, capacity: number): Promise<void> {
    const now = this.clock.now();
    await this.store.repos.hosting.heartbeat(runnerId, host, capacity, now, now - RUNNER_FORGET_MS);
  }

  /** Runners heard of in the last {@link RUNNER_LIVE_MS}. */
  liveRunnerCount(): Promise<number> {
    return this.store.repos.hosting.countRunnersSeenSince(this.clock.now() - RUNNER_LIVE_MS);
  }

  /**
   * Takes agents meant to run that no runner holds (or whose runner's lease ran out), so that
   * the runner holds at most `max`; answers those newly held, for `leaseMs`.
   */
  async claim(runnerId: string, max: number, leaseMs: number): Promise<string[]> {
    const now = this.clock.now();
    const { hosting } = this.store.repos;
    const room = max - (await hosting.countHeld(runnerId, now));
    return hosting.claim(runnerId, room, now, now + leaseMs);
  }

  /**
   * Extends the runner's hold on every agent it holds for `leaseMs`, and answers them with
   * what their owners want. An agent missing from the answer (deleted, or taken by another
   * runner after the lease ran out) is no longer the runner's to run.
   */
  async renew(runnerId: string, leaseMs: number): Promise<HeldAgentState[]> {
    const held = await this.store.repos.hosting.renew(runnerId, this.clock.now() + leaseMs);
    return held.map((row) => ({
      address: row.address,
      desired: row.desired_state as DesiredState,
      codeDigest: row.code_digest,
    }));
  }

  async release(runnerId: string, address: string): Promise<void> {
    await this.store.repos.hosting.release(runnerId, address);
  }

  /** What the runner needs to start the agent's process; 404 when it is gone or has no code. */
  async runSpec(address: string): Promise<HostedRunSpec> {
    const { hosting, agents } = this.store.repos;
    const [row, listing] = await Promise.all([hosting.find(address), agents.find(address)]);
    if (!row || !listing) throw notFound(address);
    if (row.code === null || row.code_digest === null) {
      throw new NotFoundError(`Hosted agent ${address} has no code to run`);
    }
    const key = this.key.get();
    const secrets: Record<string, string> = {};
    for (const secret of await hosting.secrets(address)) {
      secrets[secret.name] = unseal(
        key,
        secret.ciphertext,
        sealContext('secret', address, secret.name),
      );
    }
    return {
      address,
      seed: unseal(key, row.seed_ciphertext, sealContext('seed', address)),
      name: listing.name,
      files: parseCode(row.code),
      secrets,
      codeDigest: row.code_digest,
    };
  }

  /**
   * Records what the agent is and why (and, when given, how often it restarted); a change of
   * state or reason goes on its timeline too. Nothing happens for an agent that is gone.
   */
  async setState(
    address: string,
    state: HostedState,
    reason: string | null,
    restarts?: number,
  ): Promise<void> {
    const row = await this.store.repos.hosting.find(address);
    if (!row) return;
    if (restarts !== undefined) await this.store.repos.hosting.update(address, { restarts });
    await this.changeState(row, state, reason);
  }

  /**
   * Adds lines to the agent's log (each cut to {@link MAX_LOG_ENTRY} characters), keeping its
   * newest `logLines`; error lines go on its timeline too. Nothing happens for an agent that
   * is gone.
   */
  async appendLogs(address: string, lines: HostedLogLine[]): Promise<void> {
    if (lines.length === 0) return;
    const rows = lines.slice(-this.policy.logLines).map((line) => ({
      address,
      time: line.time.getTime(),
      level: line.level,
      type: line.type,
      entry: storableEntry(line.entry),
    }));
    try {
      await this.store.repos.hosting.appendLogs(address, rows, this.policy.logLines);
    } catch (err) {
      // The agent was deleted while its runner still wrote (its rows reference the agent).
      if (!(await this.store.repos.hosting.find(address))) return;
      throw err;
    }
    const errors = rows.filter((row) => row.level === 'erro');
    if (errors.length > 0) {
      await this.timeline.record(
        errors.map((row) => ({
          address,
          kind: 'event.error',
          at: row.time,
          category: 'system',
          message: row.entry,
          data: JSON.stringify({ hosted: { log_type: row.type } }),
        })),
      );
      await this.timeline.errored(address, errors[errors.length - 1]!.entry);
    }
  }

  // ---- Helpers ---------------------------------------------------------------------------

  private heldByLiveRunner(row: HostedAgentRow): boolean {
    return row.runner_id !== null && Number(row.lease_expires_at) > this.clock.now();
  }

  private async owned(ownerId: string, address: string): Promise<HostedAgentListed> {
    const row = await this.store.repos.hosting.findListed(address, ownerId);
    if (!row) throw notFound(address);
    return row;
  }

  /** Sets the state; a change of state or reason is recorded on the agent's timeline. */
  private async changeState(
    row: HostedAgentRow,
    state: HostedState,
    reason: string | null,
  ): Promise<void> {
    const now = this.clock.now();
    const text = reason === null ? null : storableEntry(reason);
    if (row.state === state && row.state_reason === text) return;
    const changed = await this.store.repos.hosting.update(row.address, {
      state,
      state_reason: text,
      state_changed_at: now,
    });
    if (!changed) return;
    const failing = state === 'crashed' || state === 'failed';
    const message = `Hosted agent ${state}${text === null ? '' : `: ${text}`}`;
    await this.timeline.record([
      {
        address: row.address,
        kind: failing ? 'event.error' : 'event.info',
        at: now,
        category: 'system',
        message,
        data: JSON.stringify({ hosted: { state, reason: text, previous: row.state } }),
      },
    ]);
    if (failing) await this.timeline.errored(row.address, message);
  }
}
