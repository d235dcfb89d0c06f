import { availableParallelism } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseProxyEntry } from './proxy-entries.js';

/**
 * The only module that reads process.env. Every setting has one field here; CLI flags and
 * AGENTRY_* variables map onto the same fields, and a bad value stops the process at start
 * with a sentence that says what to set.
 */

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
export type LogFormat = 'json' | 'pretty';
export const logFormats: readonly LogFormat[] = ['json', 'pretty'];

/** The headers a trusted proxy may name its client in. */
export type ForwardedHeader = 'x-forwarded-for' | 'forwarded';
export const forwardedHeaders: readonly ForwardedHeader[] = ['x-forwarded-for', 'forwarded'];

export interface Quotas {
  agents: number;
  messagesPerMonth: number;
  bytesStored: number;
  bytesTransferredPerMonth: number;
}

/** How hosted agents are run (docs/hosting.md). */
export interface HostingConfig {
  /** The Python interpreter that runs agents (with uagents installed); unset: none run here. */
  python: string | undefined;
  /** `serve`: the serving process runs agents (when `python` is set); `separate`: only `agentry runner` does. */
  runner: 'serve' | 'separate';
  /** `off`: agents run as plain processes; `bwrap`: each in a bubblewrap sandbox. */
  sandbox: 'off' | 'bwrap';
  /** `agentry`: agents may reach only this Agentry; `any`: anywhere. */
  egress: 'agentry' | 'any';
  /** Whether an agent's requirements.txt is installed into an environment of its own. */
  allowRequirements: boolean;
  /** Where each agent gets its private directory. */
  dir: string;
  /** Agents one runner runs at most. */
  maxAgents: number;
  memoryMb: number;
  cpuPercent: number;
  processes: number;
  openFiles: number;
  diskMb: number;
  /**
   * A runner running as root with the sandbox on runs each agent as a user of its own, from
   * this number up (one per agent it runs at once).
   */
  uidBase: number;
  /** Log lines kept per agent (the newest). */
  logLines: number;
  /** Log lines one agent may write a second; beyond them lines are dropped. */
  logLinesPerSecond: number;
  /** Keys one agent's storage holds at most. */
  storageKeys: number;
  /** Bytes (keys and values) one agent's storage holds at most. */
  storageBytes: number;
  /**
   * The key (64 hex digits) that seals seeds and secrets; unset: on SQLite, one made and kept
   * beside the database; on PostgreSQL, hosting refuses to create agents and secrets.
   */
  key: string | undefined;
}

export const hostingRunners: readonly HostingConfig['runner'][] = ['serve', 'separate'];
export const hostingSandboxes: readonly HostingConfig['sandbox'][] = ['off', 'bwrap'];
export const hostingEgresses: readonly HostingConfig['egress'][] = ['agentry', 'any'];

export interface Config {
  databaseUrl: string;
  /** Connections each process keeps to PostgreSQL (SQLite has one). */
  databasePoolSize: number;
  host: string;
  port: number;
  /** The URL agents use to reach this service; mailbox and proxy endpoint URLs derive from it. */
  publicUrl: string;
  allowPrivateTargets: boolean;
  /** SQLite: refuse a second serving process on the same file (AGENTRY_SQLITE_EXCLUSIVE). */
  sqliteExclusive: boolean;
  migrateOnStart: boolean;
  logLevel: LogLevel;
  /** Human-readable lines on a terminal, JSON otherwise, unless set. */
  logFormat: LogFormat;
  /** One info line per request answered (method, path, status, time); otherwise at debug. */
  logRequests: boolean;
  /** Create one user and print its key when the store has no users (first start). */
  bootstrapUser: boolean;
  challengeTtlSeconds: number;
  /** Lifetime of an access token of the v1 mailroom (uAgents 0.22 mailbox clients). */
  v1TokenTtlSeconds: number;
  attestationSkewSeconds: number;
  attestationMaxWindowSeconds: number;
  envelopeBodyLimitBytes: number;
  bodyLimitBytes: number;
  /** Largest body of a batch registration: a full batch does not fit in `bodyLimitBytes`. */
  batchBodyLimitBytes: number;
  mailboxRetentionSeconds: number;
  /**
   * How long an agent's poll of its empty mailbox is held open waiting for a message; 0
   * answers at once.
   */
  mailboxHoldSeconds: number;
  /** Whether what happens to each message is recorded for its owner (the delivery trace). */
  deliveryTrace: boolean;
  proxyTimeoutMs: number;
  proxySyncTimeoutMs: number;
  /**
   * How long an A2A call waits for the agent's reply before answering with its task still
   * working (docs/a2a.md); `tasks/get` then reads the reply when it comes.
   */
  a2aReplyTimeoutMs: number;
  /**
   * A proxy agent whose forward failed is tried again after this long, then after twice as
   * long at each failure, up to {@link proxyRetryMaxMs} (each wait up to a quarter longer).
   */
  proxyRetryBaseMs: number;
  /** The longest wait between two attempts to forward to a proxy agent whose forwards fail. */
  proxyRetryMaxMs: number;
  /**
   * Worker threads that check signatures (envelopes, identity proofs, Almanac attestations);
   * 0 checks them on the event loop.
   */
  verifierThreads: number;
  quotas: Quotas;
  rateLimit: { max: number; windowMs: number };
  /**
   * Time a client has to send a whole request, headers and body (0: no limit). It ends once
   * the request is received: a response still being prepared, such as a held poll, is not
   * limited by it.
   */
  requestTimeoutMs: number;
  /** Time a client has to send a request's headers from the moment it connects or starts one. */
  headersTimeoutMs: number;
  /** How long an idle keep-alive connection stays open between requests. */
  keepAliveTimeoutMs: number;
  /**
   * Connections one client address may hold open at once (0: no limit). Behind a trusted
   * proxy, requests in progress at once from one forwarded client address.
   */
  maxConnectionsPerAddress: number;
  /**
   * Reverse proxies (addresses or CIDR ranges) whose forwarding header is believed: the client
   * address is the first hop, from the end, that is not one of them.
   */
  trustedProxies: string[];
  /**
   * The one header the trusted proxies name the client in: `x-forwarded-for`, or the RFC 7239
   * `forwarded`. The other is ignored, whoever wrote it.
   */
  forwardedHeader: ForwardedHeader;
  /** Polls one agent may have held at once; past it, its oldest held poll is answered (empty). */
  maxHeldPollsPerAgent: number;
  /** Lifetime of a web console sign-in (never beyond the API key it was opened with). */
  sessionTtlSeconds: number;
  /** Redis that holds rate-limit counters shared by replicas; unset: each process counts alone. */
  redisUrl: string | undefined;
  /** Prefix of every key Agentry writes to Redis. */
  redisKeyPrefix: string;
  /** On SIGTERM, how long the server keeps serving (not ready) before it stops accepting. */
  drainSeconds: number;
  /** An agent that worked within this long is active (docs/activity.md, "Status"). */
  agentActiveSeconds: number;
  /** An agent not seen for longer is offline. */
  agentIdleSeconds: number;
  /**
   * How long past its cadence a mailbox agent's next poll may come before nobody is polling
   * (it is unreachable).
   */
  agentPollGraceSeconds: number;
  /** How long an error an agent reports keeps it failing. */
  agentErrorSeconds: number;
  /** Events one agent may report a minute (`POST /v1/events`), per process. */
  eventsPerMinute: number;
  /** Live activity streams one user may hold open at once, per process. */
  streamsPerUser: number;
  /** How long one webhook delivery attempt waits for the receiver (docs/webhooks.md). */
  webhookTimeoutMs: number;
  /** The wait before each retry of a failed webhook delivery; after the last, it is given up. */
  webhookRetryDelaysMs: number[];
  /** The largest asset (`/v1/storage/assets/`) one upload may hold, in bytes (docs/storage.md). */
  assetMaxBytes: number;
  /**
   * Where asset contents are kept: undefined keeps them in the database; a directory keeps
   * each in a file there (for deployments with many or large assets).
   */
  assetsDir: string | undefined;
  /**
   * The user (by name or id) under whom any agent may register itself with its own
   * attestation, enrolled or not; unset: only enrolled agents may.
   */
  openAgentRegistration: string | undefined;
  hosting: HostingConfig;
  federation: FederationConfig;
}

/** A peer Agentry (docs/federation.md): where it answers and the address that signs for it. */
export interface FederationPeer {
  url: string;
  address: string;
}

/** Federation with other Agentry instances and Almanac services (docs/federation.md). */
export interface FederationConfig {
  /** Agentry instances this one federates with (AGENTRY_PEERS); each is an upstream too. */
  peers: FederationPeer[];
  /** Plain Almanac API services asked and published to (AGENTRY_UPSTREAMS). */
  upstreams: string[];
  /** The longest wait for one upstream's answer. */
  timeoutMs: number;
  /** The longest a remote answer is kept (never past the record's own expiry). */
  cacheSeconds: number;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

export const defaults: Config = {
  databaseUrl: 'sqlite:./data/agentry.db',
  databasePoolSize: 10,
  host: '127.0.0.1',
  port: 8000,
  publicUrl: 'http://127.0.0.1:8000',
  allowPrivateTargets: false,
  sqliteExclusive: true,
  migrateOnStart: true,
  logLevel: 'info',
  logFormat: 'json',
  logRequests: false,
  bootstrapUser: true,
  challengeTtlSeconds: 300,
  v1TokenTtlSeconds: 3600,
  attestationSkewSeconds: 60,
  attestationMaxWindowSeconds: 24 * 3600,
  envelopeBodyLimitBytes: MiB,
  bodyLimitBytes: 256 * KiB,
  batchBodyLimitBytes: 4 * MiB,
  mailboxRetentionSeconds: 7 * 24 * 3600,
  mailboxHoldSeconds: 20,
  deliveryTrace: true,
  proxyTimeoutMs: 10_000,
  a2aReplyTimeoutMs: 60_000,
  proxySyncTimeoutMs: 30_000,
  proxyRetryBaseMs: 2_000,
  proxyRetryMaxMs: 30_000,
  // One core stays with the event loop; a thread where there is no second core only adds
  // the cost of passing messages.
  verifierThreads: Math.min(availableParallelism() - 1, 2),
  quotas: {
    agents: 1000,
    messagesPerMonth: 1_000_000,
    bytesStored: GiB,
    bytesTransferredPerMonth: 10 * GiB,
  },
  rateLimit: { max: 6000, windowMs: 60_000 },
  requestTimeoutMs: 60_000,
  headersTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  maxConnectionsPerAddress: 256,
  trustedProxies: [],
  forwardedHeader: 'x-forwarded-for',
  maxHeldPollsPerAgent: 4,
  sessionTtlSeconds: 12 * 3600,
  redisUrl: undefined,
  redisKeyPrefix: 'agentry:',
  drainSeconds: 5,
  agentActiveSeconds: 120,
  // uAgents registers in the Almanac every hour: an agent quiet for longer is not running.
  agentIdleSeconds: 3900,
  agentPollGraceSeconds: 5,
  agentErrorSeconds: 300,
  eventsPerMinute: 6000,
  streamsPerUser: 20,
  webhookTimeoutMs: 10_000,
  // 10 s, 30 s, 2 min, 10 min, 1 h: six attempts over about 73 minutes.
  webhookRetryDelaysMs: [10_000, 30_000, 120_000, 600_000, 3_600_000],
  assetMaxBytes: 10 * MiB,
  assetsDir: undefined,
  openAgentRegistration: undefined,
  hosting: {
    python: undefined,
    runner: 'serve',
    sandbox: 'off',
    egress: 'agentry',
    allowRequirements: false,
    // Follows the database unless set (see hostingDirBeside).
    dir: '',
    maxAgents: 50,
    memoryMb: 512,
    cpuPercent: 50,
    processes: 64,
    openFiles: 256,
    diskMb: 100,
    // Above the ranges systems hand out to accounts and containers, below 2^31.
    uidBase: 2_000_000_000,
    logLines: 1000,
    logLinesPerSecond: 100,
    storageKeys: 1000,
    storageBytes: MiB,
    key: undefined,
  },
  federation: { peers: [], upstreams: [], timeoutMs: 2000, cacheSeconds: 300 },
};

/** The largest `AGENTRY_HOSTING_STORAGE_BYTES`: a whole storage is read into memory at once. */
export const HOSTING_STORAGE_BYTES_LIMIT = 64 * MiB;
/** The most lines `AGENTRY_HOSTING_LOG_LINES` keeps per agent. */
export const HOSTING_LOG_LINES_LIMIT = 100_000;

/**
 * Where hosted agents' directories go by default: `hosted` beside the SQLite database, or in
 * `./data` for PostgreSQL (and an in-memory database).
 */
export function hostingDirBeside(databaseUrl: string): string {
  const path = databaseUrl.startsWith('sqlite:')
    ? databaseUrl.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '')
    : ':memory:';
  return path === ':memory:' ? resolve('data', 'hosted') : join(dirname(resolve(path)), 'hosted');
}

/** The largest `AGENTRY_ASSET_MAX_BYTES` admitted: one upload is held in memory whole. */
export const ASSET_MAX_BYTES_LIMIT = 256 * MiB;

type Env = Record<string, string | undefined>;

function parseInteger(name: string, raw: string, min: number): number {
  if (!/^\d+$/.test(raw.trim())) {
    throw new ConfigError(`${name} must be a whole number (got "${raw}").`);
  }
  const value = Number(raw.trim());
  if (!Number.isSafeInteger(value) || value < min) {
    throw new ConfigError(`${name} must be an integer of at least ${min} (got "${raw}").`);
  }
  return value;
}

function parseTrustedProxies(raw: string): string[] {
  const entries = raw
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
  for (const entry of entries) {
    const problem = parseProxyEntry(entry);
    if (typeof problem === 'string') {
      throw new ConfigError(
        `AGENTRY_TRUSTED_PROXIES must list the reverse proxies' addresses or CIDR ranges, separated by commas (e.g. 10.0.0.5,172.28.0.0/24): ${problem}.`,
      );
    }
  }
  return entries;
}

/** An http(s) URL without its trailing slashes; undefined when it is not one. */
function baseUrl(raw: string): string | undefined {
  try {
    const url = new URL(raw);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
    return raw.replace(/\/+$/, '');
  } catch {
    return undefined;
  }
}

function listOf(raw: string): string[] {
  return raw
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
}

/** `URL=agent1…` entries: each peer's URL and the instance address that signs its requests. */
function parsePeers(raw: string): FederationPeer[] {
  return listOf(raw).map((entry) => {
    const at = entry.lastIndexOf('=');
    const url = at > 0 ? baseUrl(entry.slice(0, at).trim()) : undefined;
    const address = at > 0 ? entry.slice(at + 1).trim() : '';
    if (url === undefined || !/^agent1[02-9ac-hj-np-z]{50,}$/.test(address)) {
      throw new ConfigError(
        `AGENTRY_PEERS must list peers as URL=agent1… (the peer's address, from its GET /v2/federation), separated by commas (got "${entry}").`,
      );
    }
    return { url, address };
  });
}

function parseUpstreams(raw: string): string[] {
  return listOf(raw).map((entry) => {
    const url = baseUrl(entry);
    if (url === undefined) {
      throw new ConfigError(
        `AGENTRY_UPSTREAMS must list http(s) URLs separated by commas, such as https://agentverse.ai (got "${entry}").`,
      );
    }
    return url;
  });
}

function parseBoolean(name: string, raw: string): boolean {
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
  throw new ConfigError(`${name} must be true or false (got "${raw}").`);
}

export const logLevels: readonly LogLevel[] = [
  'fatal',
  'error',
  'warn',
  'info',
  'debug',
  'trace',
  'silent',
];

/** Settings that may be given on the command line; same names as the Config fields. */
export type ConfigOverrides = Partial<
  Pick<
    Config,
    | 'databaseUrl'
    | 'host'
    | 'port'
    | 'publicUrl'
    | 'allowPrivateTargets'
    | 'migrateOnStart'
    | 'logLevel'
    | 'logFormat'
    | 'logRequests'
  >
>;

/**
 * Builds the configuration from defaults, then AGENTRY_* variables, then explicit overrides
 * (CLI flags), and validates the result.
 */
export function loadConfig(overrides: ConfigOverrides = {}, env: Env = process.env): Config {
  const config: Config = structuredClone(defaults);
  const read = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v === '' ? undefined : v;
  };
  const int = (name: string, min: number, apply: (n: number) => void): void => {
    const raw = read(name);
    if (raw !== undefined) apply(parseInteger(name, raw, min));
  };
  const bool = (name: string, apply: (b: boolean) => void): void => {
    const raw = read(name);
    if (raw !== undefined) apply(parseBoolean(name, raw));
  };

  const databaseUrl = read('AGENTRY_DATABASE_URL');
  if (databaseUrl) config.databaseUrl = databaseUrl;
  int('AGENTRY_DATABASE_POOL_SIZE', 1, (n) => (config.databasePoolSize = n));
  const host = read('AGENTRY_HOST');
  if (host) config.host = host;
  int('AGENTRY_PORT', 0, (n) => (config.port = n));
  const publicUrl = read('AGENTRY_PUBLIC_URL');
  bool('AGENTRY_ALLOW_PRIVATE_TARGETS', (b) => (config.allowPrivateTargets = b));
  bool('AGENTRY_SQLITE_EXCLUSIVE', (b) => (config.sqliteExclusive = b));
  bool('AGENTRY_MIGRATE_ON_START', (b) => (config.migrateOnStart = b));
  bool('AGENTRY_BOOTSTRAP_USER', (b) => (config.bootstrapUser = b));
  bool('AGENTRY_DELIVERY_TRACE', (b) => (config.deliveryTrace = b));
  bool('AGENTRY_LOG_REQUESTS', (b) => (config.logRequests = b));
  const logLevel = read('AGENTRY_LOG_LEVEL');
  if (logLevel) config.logLevel = logLevel as LogLevel;
  config.logFormat =
    (read('AGENTRY_LOG_FORMAT') as LogFormat | undefined) ??
    (process.stdout.isTTY ? 'pretty' : 'json');
  int('AGENTRY_CHALLENGE_TTL_SECONDS', 1, (n) => (config.challengeTtlSeconds = n));
  int('AGENTRY_V1_TOKEN_TTL_SECONDS', 1, (n) => (config.v1TokenTtlSeconds = n));
  int('AGENTRY_ATTESTATION_SKEW_SECONDS', 0, (n) => (config.attestationSkewSeconds = n));
  int('AGENTRY_ATTESTATION_MAX_WINDOW_SECONDS', 1, (n) => (config.attestationMaxWindowSeconds = n));
  int('AGENTRY_ENVELOPE_BODY_LIMIT_BYTES', 1024, (n) => (config.envelopeBodyLimitBytes = n));
  int('AGENTRY_BODY_LIMIT_BYTES', 1024, (n) => (config.bodyLimitBytes = n));
  int('AGENTRY_BATCH_BODY_LIMIT_BYTES', 1024, (n) => (config.batchBodyLimitBytes = n));
  int('AGENTRY_MAILBOX_RETENTION_SECONDS', 1, (n) => (config.mailboxRetentionSeconds = n));
  int('AGENTRY_MAILBOX_HOLD_SECONDS', 0, (n) => (config.mailboxHoldSeconds = n));
  int('AGENTRY_PROXY_TIMEOUT_MS', 1, (n) => (config.proxyTimeoutMs = n));
  int('AGENTRY_A2A_REPLY_TIMEOUT_MS', 1, (n) => (config.a2aReplyTimeoutMs = n));
  int('AGENTRY_PROXY_SYNC_TIMEOUT_MS', 1, (n) => (config.proxySyncTimeoutMs = n));
  int('AGENTRY_PROXY_RETRY_BASE_MS', 1, (n) => (config.proxyRetryBaseMs = n));
  int('AGENTRY_PROXY_RETRY_MAX_MS', 1, (n) => (config.proxyRetryMaxMs = n));
  int('AGENTRY_VERIFIER_THREADS', 0, (n) => (config.verifierThreads = n));
  int('AGENTRY_QUOTA_AGENTS', 0, (n) => (config.quotas.agents = n));
  int('AGENTRY_QUOTA_MESSAGES_PER_MONTH', 0, (n) => (config.quotas.messagesPerMonth = n));
  int('AGENTRY_QUOTA_BYTES_STORED', 0, (n) => (config.quotas.bytesStored = n));
  int('AGENTRY_QUOTA_BYTES_TRANSFERRED_PER_MONTH', 0, (n) => {
    config.quotas.bytesTransferredPerMonth = n;
  });
  int('AGENTRY_RATE_LIMIT_MAX', 0, (n) => (config.rateLimit.max = n));
  int('AGENTRY_RATE_LIMIT_WINDOW_MS', 1, (n) => (config.rateLimit.windowMs = n));
  int('AGENTRY_REQUEST_TIMEOUT_MS', 0, (n) => (config.requestTimeoutMs = n));
  int('AGENTRY_HEADERS_TIMEOUT_MS', 1, (n) => (config.headersTimeoutMs = n));
  int('AGENTRY_KEEP_ALIVE_TIMEOUT_MS', 1, (n) => (config.keepAliveTimeoutMs = n));
  int('AGENTRY_MAX_CONNECTIONS_PER_ADDRESS', 0, (n) => (config.maxConnectionsPerAddress = n));
  const trusted = read('AGENTRY_TRUSTED_PROXIES');
  if (trusted !== undefined) config.trustedProxies = parseTrustedProxies(trusted);
  const forwarded = read('AGENTRY_FORWARDED_HEADER');
  if (forwarded !== undefined) {
    config.forwardedHeader = oneOf(
      'AGENTRY_FORWARDED_HEADER',
      forwarded.trim().toLowerCase(),
      forwardedHeaders,
    );
  }
  int('AGENTRY_MAX_HELD_POLLS_PER_AGENT', 1, (n) => (config.maxHeldPollsPerAgent = n));
  int('AGENTRY_SESSION_TTL_SECONDS', 60, (n) => (config.sessionTtlSeconds = n));
  config.redisUrl = read('AGENTRY_REDIS_URL') ?? config.redisUrl;
  config.redisKeyPrefix = read('AGENTRY_REDIS_KEY_PREFIX') ?? config.redisKeyPrefix;
  int('AGENTRY_DRAIN_SECONDS', 0, (n) => (config.drainSeconds = n));
  int('AGENTRY_AGENT_ACTIVE_SECONDS', 1, (n) => (config.agentActiveSeconds = n));
  int('AGENTRY_AGENT_IDLE_SECONDS', 1, (n) => (config.agentIdleSeconds = n));
  int('AGENTRY_AGENT_POLL_GRACE_SECONDS', 1, (n) => (config.agentPollGraceSeconds = n));
  int('AGENTRY_AGENT_ERROR_SECONDS', 1, (n) => (config.agentErrorSeconds = n));
  int('AGENTRY_EVENTS_PER_MINUTE', 1, (n) => (config.eventsPerMinute = n));
  int('AGENTRY_STREAMS_PER_USER', 1, (n) => (config.streamsPerUser = n));
  int('AGENTRY_WEBHOOK_TIMEOUT_MS', 1, (n) => (config.webhookTimeoutMs = n));
  const retryDelays = read('AGENTRY_WEBHOOK_RETRY_DELAYS_SECONDS');
  config.openAgentRegistration = read('AGENTRY_OPEN_AGENT_REGISTRATION')?.trim() || undefined;
  if (retryDelays !== undefined) {
    config.webhookRetryDelaysMs = retryDelays
      .split(',')
      .filter((part) => part.trim() !== '')
      .map((part) => parseInteger('AGENTRY_WEBHOOK_RETRY_DELAYS_SECONDS', part, 1) * 1000);
  }

  int('AGENTRY_ASSET_MAX_BYTES', 1, (n) => (config.assetMaxBytes = n));
  config.assetsDir = read('AGENTRY_ASSETS_DIR')?.trim() || config.assetsDir;

  readHosting(config.hosting, read, int, bool);
  const peers = read('AGENTRY_PEERS');
  if (peers !== undefined) config.federation.peers = parsePeers(peers);
  const upstreams = read('AGENTRY_UPSTREAMS');
  if (upstreams !== undefined) config.federation.upstreams = parseUpstreams(upstreams);
  int('AGENTRY_FEDERATION_TIMEOUT_MS', 1, (n) => (config.federation.timeoutMs = n));
  int('AGENTRY_FEDERATION_CACHE_SECONDS', 0, (n) => (config.federation.cacheSeconds = n));

  Object.assign(config, stripUndefined(overrides));
  if (config.hosting.dir === '') config.hosting.dir = hostingDirBeside(config.databaseUrl);
  // The public URL follows the port unless it was given: a newcomer running on another port
  // still gets endpoint URLs that point at this process.
  config.publicUrl = overrides.publicUrl ?? publicUrl ?? `http://127.0.0.1:${config.port}`;
  validate(config);
  return config;
}

function oneOf<T extends string>(name: string, raw: string, values: readonly T[]): T {
  const value = raw.trim().toLowerCase();
  if (!(values as readonly string[]).includes(value)) {
    throw new ConfigError(`${name} must be one of ${values.join(', ')} (got "${raw}").`);
  }
  return value as T;
}

/** The AGENTRY_HOSTING_* settings (docs/hosting.md, "Settings"). */
function readHosting(
  hosting: HostingConfig,
  read: (name: string) => string | undefined,
  int: (name: string, min: number, apply: (n: number) => void) => void,
  bool: (name: string, apply: (b: boolean) => void) => void,
): void {
  hosting.python = read('AGENTRY_HOSTING_PYTHON')?.trim() || undefined;
  const runner = read('AGENTRY_HOSTING_RUNNER');
  if (runner !== undefined) {
    hosting.runner = oneOf('AGENTRY_HOSTING_RUNNER', runner, hostingRunners);
  }
  const sandbox = read('AGENTRY_HOSTING_SANDBOX');
  if (sandbox !== undefined) {
    hosting.sandbox = oneOf('AGENTRY_HOSTING_SANDBOX', sandbox, hostingSandboxes);
  }
  const egress = read('AGENTRY_HOSTING_EGRESS');
  if (egress !== undefined) {
    hosting.egress = oneOf('AGENTRY_HOSTING_EGRESS', egress, hostingEgresses);
  }
  bool('AGENTRY_HOSTING_ALLOW_REQUIREMENTS', (b) => (hosting.allowRequirements = b));
  hosting.dir = read('AGENTRY_HOSTING_DIR')?.trim() || hosting.dir;
  int('AGENTRY_HOSTING_MAX_AGENTS', 0, (n) => (hosting.maxAgents = n));
  int('AGENTRY_HOSTING_MEMORY_MB', 16, (n) => (hosting.memoryMb = n));
  int('AGENTRY_HOSTING_CPU_PERCENT', 1, (n) => (hosting.cpuPercent = n));
  int('AGENTRY_HOSTING_PROCESSES', 1, (n) => (hosting.processes = n));
  int('AGENTRY_HOSTING_OPEN_FILES', 16, (n) => (hosting.openFiles = n));
  int('AGENTRY_HOSTING_DISK_MB', 1, (n) => (hosting.diskMb = n));
  int('AGENTRY_HOSTING_UID_BASE', 1000, (n) => (hosting.uidBase = n));
  int('AGENTRY_HOSTING_LOG_LINES', 1, (n) => (hosting.logLines = n));
  int('AGENTRY_HOSTING_LOG_LINES_PER_SECOND', 1, (n) => (hosting.logLinesPerSecond = n));
  int('AGENTRY_HOSTING_STORAGE_KEYS', 1, (n) => (hosting.storageKeys = n));
  int('AGENTRY_HOSTING_STORAGE_BYTES', 1024, (n) => (hosting.storageBytes = n));
  const key = read('AGENTRY_HOSTING_KEY')?.trim();
  if (key !== undefined) {
    // The value itself is never repeated: it is a secret.
    if (!/^[0-9a-fA-F]{64}$/.test(key)) {
      throw new ConfigError(
        `AGENTRY_HOSTING_KEY must be 32 bytes as 64 hexadecimal digits (got ${key.length} characters); make one with "openssl rand -hex 32".`,
      );
    }
    hosting.key = key.toLowerCase();
  }
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function validate(config: Config): void {
  if (!/^(sqlite:|postgres(ql)?:\/\/)/.test(config.databaseUrl)) {
    throw new ConfigError(
      `AGENTRY_DATABASE_URL must start with sqlite: (e.g. sqlite:./data/agentry.db) or postgres:// (got "${redactUrl(config.databaseUrl)}").`,
    );
  }
  if (config.port > 65535) throw new ConfigError(`AGENTRY_PORT must be at most 65535.`);
  if (config.requestTimeoutMs > 0 && config.headersTimeoutMs > config.requestTimeoutMs) {
    throw new ConfigError(
      `AGENTRY_HEADERS_TIMEOUT_MS (${config.headersTimeoutMs}) must not exceed AGENTRY_REQUEST_TIMEOUT_MS (${config.requestTimeoutMs}).`,
    );
  }
  try {
    const url = new URL(config.publicUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('scheme');
  } catch {
    throw new ConfigError(
      `AGENTRY_PUBLIC_URL must be an http(s) URL such as https://agentry.example.com (got "${config.publicUrl}").`,
    );
  }
  config.publicUrl = config.publicUrl.replace(/\/+$/, '');
  if (!logLevels.includes(config.logLevel)) {
    throw new ConfigError(`AGENTRY_LOG_LEVEL must be one of ${logLevels.join(', ')}.`);
  }
  if (!logFormats.includes(config.logFormat)) {
    throw new ConfigError(`AGENTRY_LOG_FORMAT must be one of ${logFormats.join(', ')}.`);
  }
  // The uAgents client gives up on a request after five minutes.
  if (config.mailboxHoldSeconds > 240) {
    throw new ConfigError('AGENTRY_MAILBOX_HOLD_SECONDS must be at most 240 (4 min).');
  }
  if (config.proxyRetryMaxMs < config.proxyRetryBaseMs) {
    throw new ConfigError(
      `AGENTRY_PROXY_RETRY_MAX_MS (${config.proxyRetryMaxMs}) must not be less than AGENTRY_PROXY_RETRY_BASE_MS (${config.proxyRetryBaseMs}).`,
    );
  }
  if (config.redisUrl !== undefined && !/^rediss?:\/\//.test(config.redisUrl)) {
    throw new ConfigError(
      `AGENTRY_REDIS_URL must start with redis:// or rediss:// (got "${redactUrl(config.redisUrl)}").`,
    );
  }
  if (config.webhookRetryDelaysMs.length > 20) {
    throw new ConfigError('AGENTRY_WEBHOOK_RETRY_DELAYS_SECONDS takes at most 20 delays.');
  }
  if (config.assetMaxBytes > ASSET_MAX_BYTES_LIMIT) {
    throw new ConfigError(
      `AGENTRY_ASSET_MAX_BYTES must be at most ${ASSET_MAX_BYTES_LIMIT} (256 MiB): an upload is held in memory whole.`,
    );
  }
  const dir = config.assetsDir;
  if (dir !== undefined && ['\n', '\r', '\u0000'].some((c) => dir.includes(c))) {
    throw new ConfigError('AGENTRY_ASSETS_DIR must be a directory path (got a control character).');
  }
  const { hosting } = config;
  if (hosting.cpuPercent > 100 * availableParallelism()) {
    throw new ConfigError(
      `AGENTRY_HOSTING_CPU_PERCENT must be at most ${100 * availableParallelism()} (100 per core of this machine).`,
    );
  }
  if (hosting.storageBytes > HOSTING_STORAGE_BYTES_LIMIT) {
    throw new ConfigError(
      `AGENTRY_HOSTING_STORAGE_BYTES must be at most ${HOSTING_STORAGE_BYTES_LIMIT} (64 MiB).`,
    );
  }
  // One user per agent a runner runs at once; (uid_t)-1 means "no change" to the kernel.
  if (hosting.uidBase + hosting.maxAgents >= 2 ** 32 - 1) {
    throw new ConfigError(
      `AGENTRY_HOSTING_UID_BASE plus AGENTRY_HOSTING_MAX_AGENTS must be below ${2 ** 32 - 1} (user ids are 32 bits).`,
    );
  }
  if (hosting.logLines > HOSTING_LOG_LINES_LIMIT) {
    throw new ConfigError(`AGENTRY_HOSTING_LOG_LINES must be at most ${HOSTING_LOG_LINES_LIMIT}.`);
  }
  if (['\n', '\r', '\u0000'].some((c) => hosting.dir.includes(c))) {
    throw new ConfigError(
      'AGENTRY_HOSTING_DIR must be a directory path (got a control character).',
    );
  }
  if (
    hosting.python !== undefined &&
    ['\n', '\r', '\u0000'].some((c) => hosting.python!.includes(c))
  ) {
    throw new ConfigError(
      'AGENTRY_HOSTING_PYTHON must be the path or name of a Python interpreter (got a control character).',
    );
  }
  if (config.attestationMaxWindowSeconds > 24 * 3600) {
    throw new ConfigError('AGENTRY_ATTESTATION_MAX_WINDOW_SECONDS must be at most 86400 (24 h).');
  }
}

/** Hides the password of a database URL so it can be logged or shown in an error. */
export function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]+):[^@/]*@/, '$1:***@');
}

/** Parses durations such as 30d, 12h, 15m, 45s (used by `keys add --expires`). */
export function parseDuration(text: string): number {
  const match = /^(\d+)\s*([smhdw])$/.exec(text.trim());
  if (!match) {
    throw new ConfigError(
      `"${text}" is not a duration; use a number and a unit: 45s, 15m, 12h, 30d, 2w.`,
    );
  }
  const unit = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 }[
    match[2] as 's' | 'm' | 'h' | 'd' | 'w'
  ];
  return Number(match[1]) * unit * 1000;
}
