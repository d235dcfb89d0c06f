import { AttestationAuthenticator } from './auth/attestations.js';
import { ChangeFeed } from './infra/change-feed.js';
import { AccessWatch } from './services/access-watch.js';
import { ConfigError, type Config } from './config/index.js';
import { createDefaultVerifier, type SignatureVerifier } from './crypto/index.js';
import { Agent, type Dispatcher } from 'undici';
import { createLogger, type Logger } from './logger.js';
import { Metrics } from './metrics.js';
import { AgentsService } from './services/agents.js';
import { Courier } from './services/courier.js';
import { A2aService } from './services/a2a/service.js';
import { FederationService } from './services/federation/service.js';
import { InstanceIdentity } from './services/federation/identity.js';
import { ChatService } from './services/chat.js';
import { ChatIdentities } from './services/chat-identities.js';
import { ExternalA2aAgents } from './services/a2a/external.js';
import { CardReader } from './services/a2a/external-card.js';
import { ExternalA2aCalls } from './services/a2a/external-call.js';
import { CHAT_TEXT_MAX_LENGTH } from './wire/chat.js';
import { ProbesService } from './services/probes.js';
import { HEALTH_RATE_WINDOW_MS } from './wire/probes.js';
import { AlmanacService } from './services/almanac.js';
import { systemClock, type Clock } from './infra/clock.js';
import { SearchService } from './services/search.js';
import { DomainsService } from './services/domains.js';
import { HeldPolls } from './infra/held-polls.js';
import { EnvelopeAdmission } from './services/envelopes.js';
import { IdentityService } from './services/identity.js';
import { DeliveryTrace } from './services/deliveries.js';
import { ActivityService } from './services/activity/index.js';
import { InteractionsService } from './services/interactions.js';
import { EnrolmentsService } from './services/enrolments.js';
import { HandlesService } from './services/handles.js';
import { HostingService } from './services/hosting/index.js';
import { HostingKey, type HostingKeySource } from './infra/hosting-key.js';
import { KeysService } from './services/keys.js';
import { MailboxService } from './services/mailbox.js';
import { MailroomService } from './services/mailroom.js';
import { createOutboundDispatcher } from './infra/outbound.js';
import { ProxyService } from './services/proxy.js';
import { ForwardOutages } from './services/proxy-outages.js';
import { HostingRunner, type HostingRunnerOptions } from './runner/runner.js';
import { McpSessionsService } from './services/mcp-sessions.js';
import { SERVER_HEARTBEAT_MS, ServersService } from './services/servers.js';
import { SessionsService } from './services/sessions.js';
import { StorageAssetsService } from './services/storage-assets.js';
import { AssetFiles } from './infra/asset-files.js';
import { UsageService } from './services/usage.js';
import { TeamsService } from './services/teams.js';
import { UsersService } from './services/users.js';
import { WebhooksService } from './services/webhooks.js';
import { inlineEnvelopeVerifier, inlineSignatureChecker } from './infra/signature-checker.js';
import { SharedRateLimits } from './infra/rate-limit-store.js';
import { TrustedProxies } from './infra/trusted-proxies.js';
import { Lifecycle } from './infra/lifecycle.js';
import { VerifierPool } from './infra/verifier-pool.js';
import { Store } from './store/index.js';
import { sqlitePath } from './store/database.js';
import { PostgresChangeRelay } from './store/change-relay.js';
import { version } from './version.js';

export interface Services {
  users: UsersService;
  keys: KeysService;
  teams: TeamsService;
  identity: IdentityService;
  usage: UsageService;
  agents: AgentsService;
  almanac: AlmanacService;
  mailbox: MailboxService;
  mailroom: MailroomService;
  proxy: ProxyService;
  interactions: InteractionsService;
  deliveries: DeliveryTrace;
  activity: ActivityService;
  domains: DomainsService;
  search: SearchService;
  sessions: SessionsService;
  webhooks: WebhooksService;
  storageAssets: StorageAssetsService;
  enrolments: EnrolmentsService;
  handles: HandlesService;
  hosting: HostingService;
  access: AccessWatch;
  chat: ChatService;
  externalA2a: ExternalA2aAgents;
  probes: ProbesService;
  mcpSessions: McpSessionsService;
  a2a: A2aService;
  federation: FederationService;
  servers: ServersService;
}

/** A job the server runs on a timer (expiry sweeps and the like). */
export interface HousekeepingTask {
  name: string;
  intervalMs: number;
  run(): Promise<unknown>;
}

/**
 * Work the server goes on doing while it serves, one run at a time: the next run starts at
 * once when a run says more is waiting, `idleMs` after it otherwise (or after a failure). A
 * stopping server starts no further run and waits for the one under way.
 */
export interface BackgroundLoop {
  name: string;
  idleMs: number;
  /** Resolves to true when more work may be waiting. */
  run(): Promise<boolean>;
}

export interface AppContext {
  config: Config;
  logger: Logger;
  clock: Clock;
  store: Store;
  verifier: SignatureVerifier;
  attestations: AttestationAuthenticator;
  services: Services;
  /** What commits changed, told to whatever reacts (docs/architecture.md, "After a commit"). */
  changes: ChangeFeed;
  metrics: Metrics;
  housekeeping: HousekeepingTask[];
  loops: BackgroundLoop[];
  /**
   * Ends every held mailbox poll (each answers an empty list) and answers later polls at
   * once. The app calls it when it starts closing; a drain may call it earlier.
   */
  endHeldPolls(): void;
  /** Ends up to `count` held polls, leaving later ones to be held: a drain spreads its ends. */
  endSomeHeldPolls(count: number): void;
  /** Polls held now, in this process. */
  heldPolls(): number;
  /** Rate-limit counters shared through Redis; undefined: each process counts for itself. */
  rateLimits: SharedRateLimits | undefined;
  /** Serving or draining: readiness answers 503 from the moment a drain starts. */
  lifecycle: Lifecycle;
  /** The reverse proxies whose forwarding headers are believed (AGENTRY_TRUSTED_PROXIES). */
  trustedProxies: TrustedProxies;
  close(): Promise<void>;
}

export interface ContextOptions {
  /**
   * A serving process checkpoints SQLite from a thread of its own; admin commands, which
   * write little and exit, leave it to their commits.
   */
  serving?: boolean;
}

export interface ContextOverrides {
  logger?: Logger;
  clock?: Clock;
  store?: Store;
  verifier?: SignatureVerifier;
  /** Outbound HTTP for the proxy. */
  dispatcher?: Dispatcher;
}

/**
 * The composition root: every long-lived object is built here, in one readable place.
 * Tests replace parts through `overrides`.
 */
export function createContext(
  config: Config,
  overrides: ContextOverrides = {},
  options: ContextOptions = {},
): AppContext {
  const logger =
    overrides.logger ?? createLogger({ level: config.logLevel, format: config.logFormat });
  const clock = overrides.clock ?? systemClock;
  const store =
    overrides.store ??
    Store.open(config.databaseUrl, {
      poolSize: config.databasePoolSize,
      ...(options.serving && {
        backgroundCheckpoints: {
          onError: (err: unknown) =>
            logger.error(
              { err },
              'background checkpoints failed; commits checkpoint by themselves',
            ),
        },
      }),
    });
  const verifier = overrides.verifier ?? createDefaultVerifier();
  const attestations = new AttestationAuthenticator(verifier, clock, {
    skewSeconds: config.attestationSkewSeconds,
    maxWindowSeconds: config.attestationMaxWindowSeconds,
  });

  // What commits changed, told to whatever reacts to them here and in the other processes.
  const feed = new ChangeFeed(logger);
  const users = new UsersService(store, clock);
  const keys = new KeysService(store, clock, users, feed);
  const teams = new TeamsService(store, clock, feed);
  const verifierPool =
    config.verifierThreads > 0
      ? new VerifierPool(config.verifierThreads, verifier.kind)
      : undefined;
  const signatures = verifierPool ?? inlineSignatureChecker(verifier);
  const identity = new IdentityService(store, signatures, clock, config.challengeTtlSeconds * 1000);
  const usage = new UsageService(store, clock, config.quotas);
  // A serving process on PostgreSQL hears (and tells) the other processes on the same
  // database through one LISTEN connection.
  const relay =
    store.dialect === 'postgres' && options.serving
      ? new PostgresChangeRelay(config.databaseUrl, feed, logger)
      : undefined;
  if (relay) feed.connect(relay);
  // Held mailbox polls wait here.
  const heldPolls = new HeldPolls(config.maxHeldPollsPerAgent);
  const deliveries = new DeliveryTrace(store, clock, config.deliveryTrace, feed);
  const activity = new ActivityService(
    store,
    clock,
    deliveries,
    {
      retentionMs: config.mailboxRetentionSeconds * 1000,
      activeMs: config.agentActiveSeconds * 1000,
      idleMs: config.agentIdleSeconds * 1000,
      pollGraceMs: config.agentPollGraceSeconds * 1000,
      // A serving process's start (an admin command reads statuses as they stand).
      ...(options.serving ? { processStartedAt: clock.now() } : {}),
      errorWindowMs: config.agentErrorSeconds * 1000,
      eventsPerMinute: config.eventsPerMinute,
    },
    logger,
    feed,
  );
  const agents = new AgentsService(store, usage, clock, activity, feed);
  // Seals the agent keys Agentry holds: hosted agents' seeds and secrets, chat identities.
  const sealing = new HostingKey(hostingKeySource(config));
  // People chat from identities Agentry holds, which the Almanac resolves to Agentry itself.
  const chatIdentities = new ChatIdentities(store, clock, sealing);
  const almanac = new AlmanacService(store, signatures, clock, config.publicUrl, feed);
  almanac.answersFor(chatIdentities);
  const admission = new EnvelopeAdmission(
    verifierPool ?? inlineEnvelopeVerifier(verifier),
    clock,
    deliveries,
  );
  const mailbox = new MailboxService(
    store,
    admission,
    usage,
    clock,
    { held: heldPolls, changes: feed },
    {
      retentionMs: config.mailboxRetentionSeconds * 1000,
      sweepBatchSize: 500,
      sweepMaxBatches: 100,
      maxSubmissionGroup: 256,
      holdMs: config.mailboxHoldSeconds * 1000,
    },
    deliveries,
  );
  const dispatcher =
    overrides.dispatcher ??
    createOutboundDispatcher({ allowPrivateTargets: config.allowPrivateTargets });
  // A proxy agent whose forwards fail is tried once per back-off step, its failures told once.
  const outages = new ForwardOutages(store, clock, activity, logger, {
    retryBaseMs: config.proxyRetryBaseMs,
    retryMaxMs: config.proxyRetryMaxMs,
  });
  const proxy = new ProxyService(
    store,
    admission,
    mailbox,
    dispatcher,
    clock,
    {
      timeoutMs: config.proxyTimeoutMs,
      syncTimeoutMs: config.proxySyncTimeoutMs,
      replyLimitBytes: config.envelopeBodyLimitBytes,
      forwardBatchSize: 32,
      submitUrl: almanac.ownEndpoint('proxy'),
    },
    deliveries,
    outages,
  );
  const mailroom = new MailroomService(store, identity, agents, signatures, clock, {
    challengeTtlMs: config.challengeTtlSeconds * 1000,
    tokenTtlMs: config.v1TokenTtlSeconds * 1000,
  });
  const interactions = new InteractionsService(store, clock, deliveries);
  const domains = new DomainsService(store, clock);
  const search = new SearchService(store, almanac, domains, clock);
  const sessions = new SessionsService(
    store,
    clock,
    keys,
    users,
    config.sessionTtlSeconds * 1000,
    feed,
  );
  const access = new AccessWatch(store, keys, sessions, clock, logger);
  const enrolments = new EnrolmentsService(
    store,
    clock,
    users,
    config.publicUrl,
    config.openAgentRegistration,
  );
  const handles = new HandlesService(store);

  const hosting = new HostingService(
    store,
    clock,
    agents,
    activity,
    sealing,
    {
      logLines: config.hosting.logLines,
      storageKeys: config.hosting.storageKeys,
      storageBytes: config.hosting.storageBytes,
      errorWindowMs: config.agentErrorSeconds * 1000,
    },
    feed,
    logger,
  );

  // People chat from identities Agentry holds; what agents send them arrives at the mailbox.
  const courier = new Courier(store, almanac, mailbox, proxy, dispatcher, {
    timeoutMs: config.proxyTimeoutMs,
  });
  const chat = new ChatService(store, clock, chatIdentities, usage, search, courier, feed, logger, {
    publicUrl: config.publicUrl,
    envelopeLifetimeSeconds: config.mailboxRetentionSeconds,
  });
  mailbox.receiveFor(chat);
  // External A2A agents (docs/a2a.md): their addresses, whose keys Agentry holds, resolve to
  // its mailbox; what is sent to them is answered by calling the agent, through the guard.
  const externalA2a = new ExternalA2aAgents(
    store,
    clock,
    sealing,
    agents,
    usage,
    new CardReader(dispatcher, {
      allowPrivateTargets: config.allowPrivateTargets,
      timeoutMs: config.proxyTimeoutMs,
    }),
    new ExternalA2aCalls(dispatcher, {
      timeoutMs: config.proxyTimeoutMs,
      pollMs: 500,
      maxTextLength: CHAT_TEXT_MAX_LENGTH,
    }),
    courier,
    deliveries,
    logger,
    { envelopeLifetimeSeconds: config.mailboxRetentionSeconds, publicUrl: config.publicUrl },
  );
  almanac.answersFor(externalA2a);
  mailbox.receiveFor(externalA2a);
  // Health probes an owner asks for go out as chat messages from the owner's chat identity.
  const probes = new ProbesService(
    store,
    clock,
    chat,
    activity,
    {
      answerTimeoutMs: 30_000,
      unhealthyAfter: 2,
      batch: 100,
      retentionMs: config.mailboxRetentionSeconds * 1000,
      // The probe session keeps the window success rates are measured over, within retention.
      sessionWindowMs: Math.min(config.mailboxRetentionSeconds * 1000, HEALTH_RATE_WINDOW_MS),
    },
    logger,
  );

  // MCP sessions end after a day unused: the client initializes again, as the protocol says.
  const servers = new ServersService(store, clock);
  const mcpSessions = new McpSessionsService(store, clock, feed, { idleMs: 24 * 3_600_000 });
  // Chat agents their owners serve over A2A: A2A messages reach them as chat messages.
  const a2a = new A2aService(store, clock, chat, search, agents, {
    publicUrl: config.publicUrl,
    version,
    replyTimeoutMs: config.a2aReplyTimeoutMs,
  });

  // Other Agentry instances and Almanac services (docs/federation.md). The operator names them,
  // so they are reached wherever they are, private networks included, unlike agents' URLs.
  const federationDispatcher = new Agent();
  const federation = new FederationService(
    store,
    clock,
    new InstanceIdentity(store, clock, sealing),
    almanac,
    agents,
    search,
    federationDispatcher,
    {
      publicUrl: config.publicUrl,
      peers: config.federation.peers,
      upstreams: config.federation.upstreams,
      timeoutMs: config.federation.timeoutMs,
      cacheMs: config.federation.cacheSeconds * 1000,
    },
  );
  // Without peers or upstreams a look-up of an unknown address is answered 404 by the Almanac
  // itself, without a call that could only say the same.
  if (federation.asksAnyone) almanac.resolvesFromAfar(federation);
  deliveries.namesHomesWith((address) => federation.homeOf(address));

  const metrics = new Metrics();
  metrics.countHeldPolls(() => mailbox.heldPolls);
  metrics.countEvents(() => activity.counters.eventsIngested);
  metrics.countStreams(() => activity.counters.streams);
  // Deliveries go out through the proxy's dispatcher: the same guard against private targets.
  const webhooks = new WebhooksService(
    store,
    clock,
    dispatcher,
    {
      retryDelaysMs: config.webhookRetryDelaysMs,
      timeoutMs: config.webhookTimeoutMs,
      retentionMs: config.mailboxRetentionSeconds * 1000,
      userAgent: `Agentry-Webhook/${version}`,
      allowPrivateTargets: config.allowPrivateTargets,
    },
    logger,
    (outcome) => metrics.webhookDeliveries.inc({ outcome }),
  );
  // Asset contents go to the database unless a directory is configured for them.
  const storageAssets = new StorageAssetsService(
    store,
    usage,
    clock,
    { maxBytes: config.assetMaxBytes, publicUrl: config.publicUrl },
    logger,
    config.assetsDir === undefined ? undefined : new AssetFiles(config.assetsDir),
  );
  // ---- After a commit (docs/architecture.md): who hears which changes, in one place. Each
  // consumer declares its kinds where it is written; what it hears, it hears from this
  // process at once and, for the kinds that travel, from the others through the relay.
  feed.attach(heldPolls); // held polls: messages stored, mailboxes removed
  feed.attach(activity.live); // live streams: messages, mailboxes, timeline entries
  feed.attach(activity.presenceChanges); // presence: agents seen, forwards, the Almanac
  feed.attach(webhooks); // webhooks: timeline entries recorded here
  feed.attach(outages); // proxy agents' outages: Almanac registrations and status
  feed.attach(access); // open streams: keys, sessions, memberships, teams, agents
  feed.attach(chat); // live chat sessions: entries recorded
  feed.attach(chatIdentities); // chat identities: teams deleted
  feed.attach(externalA2a); // external A2A agents: deleted
  feed.attach(mcpSessions); // MCP sessions: ended in another process
  feed.attach(federation); // published agents' registrations: relayed to the upstreams

  const rateLimits =
    options.serving && config.redisUrl && config.rateLimit.max > 0
      ? new SharedRateLimits({ url: config.redisUrl, keyPrefix: config.redisKeyPrefix, logger })
      : undefined;

  const housekeeping: HousekeepingTask[] = [
    {
      name: 'expired challenges',
      intervalMs: 60_000,
      run: () => identity.purgeExpiredChallenges(),
    },
    {
      name: 'expired v1 mailroom challenges and tokens',
      intervalMs: 60_000,
      run: () => mailroom.purgeExpired(),
    },
    {
      name: 'expired almanac registrations',
      intervalMs: 600_000,
      run: () => almanac.purgeExpired(),
    },
    {
      name: 'expired mailbox messages',
      intervalMs: 60_000,
      run: () => mailbox.sweepExpired(),
    },
    {
      name: 'expired console sessions',
      intervalMs: 600_000,
      run: () => sessions.purgeExpired(),
    },
    {
      // Changes the command line makes reach open streams this way (on SQLite, only so).
      name: 'credentials of open streams',
      intervalMs: 15_000,
      run: () => access.recheck(),
    },
    {
      name: 'agent status',
      intervalMs: 15_000,
      run: () => activity.sweep(),
    },
    {
      name: 'hosted agents recovered',
      intervalMs: 15_000,
      run: () => hosting.endQuietFailures(),
    },
    {
      name: 'expired activity',
      intervalMs: 60_000,
      run: () => activity.prune(),
    },
    {
      name: 'expired storage assets',
      intervalMs: 60_000,
      run: () => storageAssets.sweepExpired(),
    },
    {
      name: 'old webhook deliveries',
      intervalMs: 600_000,
      run: () => webhooks.prune(),
    },
    {
      name: 'old probe results',
      intervalMs: 600_000,
      run: () => probes.prune(),
    },
    {
      name: 'idle MCP sessions',
      intervalMs: 600_000,
      run: () => mcpSessions.purgeIdle(),
    },
    {
      name: 'this server listening',
      intervalMs: SERVER_HEARTBEAT_MS,
      run: () => servers.heartbeat(),
    },
    {
      name: 'expired searches',
      intervalMs: 600_000,
      run: () => search.purgeExpiredSearches(),
    },
  ];

  const loops: BackgroundLoop[] = [
    {
      // Kept messages fall due at least a base interval apart; a second is often enough to
      // look for them (and for those kept by other processes, or whose claim ran out).
      name: 'kept proxy messages',
      idleMs: Math.min(config.proxyRetryBaseMs, 1000),
      run: () => proxy.forwardDue(),
    },
    {
      // Probes fall due at least five seconds apart; answers are looked for every second.
      name: 'health probes',
      idleMs: 1000,
      run: () => probes.probeDue(),
    },
  ];

  return {
    config,
    logger,
    clock,
    store,
    verifier,
    attestations,
    changes: feed,
    services: {
      users,
      keys,
      teams,
      identity,
      usage,
      agents,
      almanac,
      mailbox,
      mailroom,
      proxy,
      interactions,
      deliveries,
      activity,
      domains,
      search,
      sessions,
      webhooks,
      storageAssets,
      enrolments,
      handles,
      hosting,
      access,
      chat,
      externalA2a,
      probes,
      mcpSessions,
      a2a,
      federation,
      servers,
    },
    metrics,
    housekeeping,
    loops,
    endHeldPolls: () => mailbox.endHeldPolls(),
    endSomeHeldPolls: (count) => mailbox.endSomeHeldPolls(count),
    heldPolls: () => mailbox.heldPolls,
    rateLimits,
    trustedProxies: new TrustedProxies(config.trustedProxies),
    lifecycle: new Lifecycle(),
    close: async () => {
      mailbox.endHeldPolls();
      // Before the store: an A2A call waiting for a reply stops, its task left for any replica.
      await a2a.close();
      await activity.close();
      // After the activity service, whose last flush may still enqueue deliveries.
      await webhooks.close();
      await relay?.close();
      await rateLimits?.close();
      await verifierPool?.close();
      await dispatcher.close();
      await federationDispatcher.close();
      await store.close();
    },
  };
}

/**
 * Where the key that seals hosted agents' seeds and secrets comes from: the setting; else, on
 * SQLite, a file beside the database (made when first needed); on PostgreSQL, nowhere.
 */
function hostingKeySource(config: Config): HostingKeySource {
  if (config.hosting.key !== undefined) return { kind: 'setting', hex: config.hosting.key };
  if (!config.databaseUrl.startsWith('sqlite:')) return { kind: 'missing' };
  const path = sqlitePath(config.databaseUrl);
  return path === ':memory:'
    ? { kind: 'ephemeral' }
    : { kind: 'file', path: `${path}.hosting-key` };
}

/**
 * The runner of hosted agents for this configuration (docs/hosting.md, "Running agents"):
 * started by the serving process (AGENTRY_HOSTING_RUNNER=serve) or by `agentry runner`.
 */
export function createHostingRunner(
  ctx: AppContext,
  overrides: Partial<HostingRunnerOptions> = {},
): HostingRunner {
  const { config } = ctx;
  const { hosting } = config;
  if (hosting.python === undefined) {
    throw new ConfigError('Hosted agents run with AGENTRY_HOSTING_PYTHON: set it.');
  }
  return new HostingRunner(
    ctx.services.hosting,
    {
      publicUrl: config.publicUrl,
      dir: hosting.dir,
      maxAgents: hosting.maxAgents,
      allowRequirements: hosting.allowRequirements,
      logLinesPerSecond: hosting.logLinesPerSecond,
      sandbox: {
        mode: hosting.sandbox,
        egress: hosting.egress,
        python: hosting.python,
        uidBase: hosting.uidBase,
        limits: {
          memoryMb: hosting.memoryMb,
          cpuPercent: hosting.cpuPercent,
          processes: hosting.processes,
          openFiles: hosting.openFiles,
          diskMb: hosting.diskMb,
        },
      },
      ...overrides,
    },
    ctx.logger,
    ctx.changes,
  );
}
