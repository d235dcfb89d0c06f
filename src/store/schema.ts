import type { ColumnType, Generated } from 'kysely';

/**
 * Table shapes shared by both dialects. Portable types only: times are integer epoch
 * milliseconds, booleans are 0/1 integers, JSON is text.
 */
export interface Database {
  users: UsersTable;
  api_keys: ApiKeysTable;
  challenges: ChallengesTable;
  identities: IdentitiesTable;
  agents: AgentsTable;
  mailboxes: MailboxesTable;
  user_quotas: UserQuotasTable;
  user_storage: UserStorageTable;
  usage_periods: UsagePeriodsTable;
  usage_days: UsageDaysTable;
  almanac_registrations: AlmanacRegistrationsTable;
  almanac_statuses: AlmanacStatusesTable;
  almanac_manifests: AlmanacManifestsTable;
  almanac_manifest_models: AlmanacManifestModelsTable;
  messages: MessagesTable;
  replays: ReplaysTable;
  quarantined_messages: QuarantinedMessagesTable;
  delivery_events: DeliveryEventsTable;
  interactions: InteractionsTable;
  almanac_protocols: AlmanacProtocolsTable;
  domains: DomainsTable;
  domain_agents: DomainAgentsTable;
  sessions: SessionsTable;
  agent_activity: AgentActivityTable;
  agent_presence: AgentPresenceTable;
  webhooks: WebhooksTable;
  teams: TeamsTable;
  team_members: TeamMembersTable;
  webhook_deliveries: WebhookDeliveriesTable;
  v1_tokens: V1TokensTable;
  v1_challenges: V1ChallengesTable;
  storage_assets: StorageAssetsTable;
  storage_asset_contents: StorageAssetContentsTable;
  storage_asset_permissions: StorageAssetPermissionsTable;
  storage_delegations: StorageDelegationsTable;
  search_pages: SearchPagesTable;
  search_clicks: SearchClicksTable;
  agent_enrolments: AgentEnrolmentsTable;
  hosted_agents: HostedAgentsTable;
  hosting_secrets: HostingSecretsTable;
  hosted_storage: HostedStorageTable;
  hosted_logs: HostedLogsTable;
  hosting_runners: HostingRunnersTable;
  chat_identities: ChatIdentitiesTable;
  chat_sessions: ChatSessionsTable;
  chat_entries: ChatEntriesTable;
  forward_outages: ForwardOutagesTable;
  hosted_failures: HostedFailuresTable;
  agent_probes: AgentProbesTable;
  agent_probe_results: AgentProbeResultsTable;
  retired_probe_sessions: RetiredProbeSessionsTable;
  mcp_sessions: McpSessionsTable;
  a2a_access: A2aAccessTable;
  a2a_tasks: A2aTasksTable;
  a2a_contexts: A2aContextsTable;
  a2a_remote_agents: A2aRemoteAgentsTable;
  federation_identity: FederationIdentityTable;
  published_agents: PublishedAgentsTable;
  servers: ServersTable;
}

export interface UsersTable {
  id: string;
  name: string;
  created_at: number;
}

export interface ApiKeysTable {
  id: string;
  user_id: string;
  /** Hex SHA-256 of the key's secret part; the secret itself is never stored. */
  secret_hash: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  /** What the key is for, as its owner named it. */
  label: ColumnType<string | null, string | null | undefined, string | null>;
  /** 1 for a key limited to safe methods (GET, HEAD). */
  read_only: ColumnType<number, number | undefined, number>;
  /** JSON array of the agent addresses the key may act on; null for every address. */
  addresses: ColumnType<string | null, string | null | undefined, string | null>;
  /**
   * For a key of a team made by one of its members (acting for it): that member. The key
   * works only while they are a member. Null for a user's own key, and for a team key the
   * operator made.
   */
  made_by: ColumnType<string | null, string | null | undefined, string | null>;
}

/** An address its owner provisioned: that agent may register itself under the owner. */
export interface AgentEnrolmentsTable {
  address: string;
  user_id: string;
  name: string;
  handle: string;
  created_at: number;
}

export interface ChallengesTable {
  challenge: string;
  user_id: string;
  address: string;
  expires_at: number;
}

export interface IdentitiesTable {
  address: string;
  user_id: string;
  proven_at: number;
}

export interface AgentsTable {
  address: string;
  user_id: string;
  name: string;
  handle: string | null;
  redirect_url: string | null;
  agent_type: string;
  /** JSON object text. */
  profile: string;
  /** JSON array text of {url, weight}. */
  endpoints: string;
  /** JSON array text of protocol digests. */
  protocols: string;
  /** JSON object text, or null. */
  metadata: string | null;
  registered_at: number;
  updated_at: number;
  /** 1: the proxy keeps a message it could not forward (and forwards it again); 0: refuses it. */
  keep_failed_forwards: ColumnType<number, number | undefined, number>;
}

export interface MailboxesTable {
  address: string;
  user_id: string;
  pending_messages: number;
  bytes_stored: number;
  created_at: number;
}

/**
 * Bytes a user stores: the sum of their mailboxes' `bytes_stored` and the sizes of their
 * storage assets (one quota for both).
 */
export interface UserStorageTable {
  user_id: string;
  bytes_stored: number;
}

/** Per-user overrides of the configured quotas; null keeps the default. */
export interface UserQuotasTable {
  user_id: string;
  agents: number | null;
  messages_per_month: number | null;
  bytes_stored: number | null;
  bytes_transferred_per_month: number | null;
}

export interface UsageDaysTable {
  user_id: string;
  /** Calendar day in UTC, `YYYY-MM-DD`. */
  day: string;
  num_messages: number;
  bytes_transferred: number;
}

export interface UsagePeriodsTable {
  user_id: string;
  /** Calendar month in UTC, `YYYY-MM`. */
  period: string;
  num_messages: number;
  bytes_transferred: number;
}

export interface AlmanacRegistrationsTable {
  address: string;
  /** Network named by the signed identifier: 'agent', 'test-agent', or null for a bare address. */
  prefix: string | null;
  /** JSON array text of {url, weight}. */
  endpoints: string;
  /** JSON array text of protocol digests. */
  protocols: string;
  /** JSON object text, or null. */
  metadata: string | null;
  /** The signed `timestamp`, in milliseconds: the replay watermark. */
  signed_at: number;
  signature: string;
  expires_at: number;
  updated_at: number;
}

export interface AlmanacStatusesTable {
  address: string;
  is_active: number;
  /** The signed `timestamp`, in milliseconds: the replay watermark of status updates. */
  signed_at: number;
  signature: string;
  updated_at: number;
}

export interface AlmanacManifestsTable {
  /** `proto:` and 64 hex digits. */
  digest: string;
  /** JSON object text. */
  manifest: string;
  /** 1 when the manifest hashes to its digest. */
  verified: number;
  stored_at: number;
  /** `metadata.name` and `metadata.version` as the manifest gives them. */
  name: string | null;
  version: string | null;
}

/** One row per model a stored manifest holds: a model's digest finds its manifests. */
export interface AlmanacManifestModelsTable {
  /** `model:` and 64 hex digits, as the manifest names it. */
  model: string;
  /** The manifest's digest. */
  digest: string;
}

export interface MessagesTable {
  /** Time-ordered (assigned ascending by the database); a mailbox lists oldest first by it. */
  id: Generated<number>;
  /** Version-4 UUID derived from the envelope's digest; the same envelope gets the same uuid. */
  uuid: string;
  address: string;
  /** The envelope as stored and served: JSON object text, its own fields as received. */
  envelope: string;
  /** UTF-8 bytes of `envelope`, the unit of the storage and transfer quotas. */
  size: number;
  received_at: number;
  expires_at: number;
  /** The envelope's sender and digest (hex), for the delivery trace; null when it is off. */
  sender: ColumnType<string | null, string | null | undefined, string | null>;
  digest: ColumnType<string | null, string | null | undefined, string | null>;
  /** When the trace last recorded the message as handed to its agent; null: never. */
  polled_at: ColumnType<number | null, number | null | undefined, number | null>;
  /**
   * When the proxy next forwards the message (kept after a failed forward); null: never. A
   * process forwarding it has moved it to the end of its lease.
   */
  next_forward_at: ColumnType<number | null, number | null | undefined, number | null>;
  /** Failed forwards of a kept message (for the backoff); 0 for a message never forwarded. */
  forward_attempts: ColumnType<number, number | undefined, number>;
}

/**
 * Messages moved out of a mailbox because they cannot be served in the form the agent's
 * client parses (stored before submit checked for it): kept for the owner to see why, until
 * deleted or expired, and counted in no quota.
 */
export interface QuarantinedMessagesTable {
  id: Generated<number>;
  uuid: string;
  address: string;
  /** The stored text, as it was. */
  envelope: string;
  size: number;
  /** Why the client could not take it. */
  reason: string;
  received_at: number;
  expires_at: number;
  quarantined_at: number;
}

/** One step of a message's delivery, or an interaction an agent reported (0008). */
export interface DeliveryEventsTable {
  id: Generated<number>;
  /** The agent whose owner may read the row: the message's target, an interaction's source. */
  address: string;
  /**
   * submitted, stored, refused, polled, deleted, expired, quarantined, forwarded, delivered,
   * interaction.
   */
  event: string;
  at: number;
  uuid: string | null;
  /** The envelope digest, hex. */
  digest: string | null;
  sender: string | null;
  size: number | null;
  status_code: number | null;
  latency_ms: number | null;
  /** Why (a refusal, a quarantine, a failed forward), who polled, an interaction's target. */
  detail: string | null;
}

export interface InteractionsTable {
  id: Generated<number>;
  source: string;
  target: string;
  session_id: string;
  created_at: number;
}

/** The uuid of an acknowledged message, kept until the message would have expired. */
export interface ReplaysTable {
  uuid: string;
  expires_at: number;
}

/** One row per protocol an Almanac registration declares (`proto:` and hex). */
export interface AlmanacProtocolsTable {
  digest: string;
  address: string;
}

/** A name a user owns, such as `alice.agent`. */
export interface DomainsTable {
  name: string;
  user_id: string;
  created_at: number;
  updated_at: number;
}

/** An agent assigned to a domain; resolution picks among them by weight. */
export interface DomainAgentsTable {
  domain: string;
  address: string;
  weight: number;
}
/** A web console sign-in, opened with an API key; it ends when that key stops being valid. */
export interface SessionsTable {
  /** Hex SHA-256 of the session token held in the browser's cookie. */
  token_hash: string;
  user_id: string;
  key_id: string;
  created_at: number;
  expires_at: number;
}

/** What an agent did or reported, beside its delivery trace (docs/activity.md). */
export interface AgentActivityTable {
  id: Generated<number>;
  address: string;
  /** `event.error`, `event.info`, `event.message`, `agent.registered`, `almanac.*`, `status.changed`, `polling.*`. */
  kind: string;
  at: number;
  /** The agent's own id of a reported event: a batch sent again stores nothing twice. */
  event_id: string | null;
  /** A reported event's category: `system` or `user`. */
  category: string | null;
  /** The other agent (a message event's peer). */
  peer: string | null;
  session: string | null;
  /** One line a person reads. */
  message: string | null;
  /** JSON: what else the event carries (exception, traceback, metadata, platform, changes). */
  data: string | null;
}

/** When an agent was last seen and how its forwards and handlers went: its status comes from here. */
export interface AgentPresenceTable {
  address: string;
  last_seen_at: number | null;
  last_poll_at: number | null;
  forward_ok_at: number | null;
  forward_failed_at: number | null;
  forward_error: string | null;
  error_at: number | null;
  error: string | null;
  /** When the agent told the Almanac it went inactive (null: active, or never said). */
  inactive_at: number | null;
  /** The status last recorded on the timeline, and when. */
  status: string | null;
  status_at: number | null;
  /** When its latest mailbox poll began, and when that poll ends (held) or ended. */
  poll_started_at: ColumnType<number | null, number | null | undefined, number | null>;
  poll_until: ColumnType<number | null, number | null | undefined, number | null>;
  /** Its latest wait between a poll's end and the next poll (its cadence); null: not seen yet. */
  poll_gap_ms: ColumnType<number | null, number | null | undefined, number | null>;
  /** When it last worked: was handed a message, acknowledged one, called with its attestation. */
  last_worked_at: ColumnType<number | null, number | null | undefined, number | null>;
}

/** Where a user wants to be told of what happens to their agents (docs/webhooks.md). */
export interface WebhooksTable {
  /** `wh_` and 16 base32 characters. */
  id: string;
  user_id: string;
  url: string;
  /** JSON array text of the kinds chosen. */
  kinds: string;
  /** JSON array text of agent addresses; null: all the user's agents. */
  agents: string | null;
  description: string | null;
  /** Signs every delivery (HMAC-SHA256); kept as it is, since the service signs with it. */
  secret: string;
  created_at: number;
  updated_at: number;
}

/** One event to tell one hook of: the queue of deliveries and their record. */
export interface WebhookDeliveriesTable {
  /** Ascending: a hook's list shows the newest first by it. */
  seq: Generated<number>;
  /** The `agentry-delivery-id` header and the payload's `id`. */
  id: string;
  webhook_id: string;
  /** A webhook kind, or `webhook.test`. */
  kind: string;
  /** The agent it is about (its deletion deletes the row); null for a test. */
  address: string | null;
  /** The JSON body, exactly as every attempt sends it. */
  payload: string;
  /** `pending`, `delivered` or `failed`. */
  status: string;
  attempts: number;
  status_code: number | null;
  error: string | null;
  created_at: number;
  last_attempt_at: number | null;
  /** When a pending delivery is due; null once it is delivered or failed. */
  next_attempt_at: number | null;
  /** While an attempt is under way, until when the process making it holds it. */
  claimed_until: number | null;
  /** The headers the last attempt sent (JSON object); its body was `payload`. */
  request_headers: string | null;
  /** The headers the receiver answered the last attempt with (JSON object); null: no answer. */
  response_headers: string | null;
  /** The start of the receiver's answer to the last attempt, as text. */
  response_body: string | null;
  /** How long the last attempt took, answered or not. */
  duration_ms: number | null;
  /** The delivery this one sends again (a redelivery); null for one the event made. */
  redelivery_of: string | null;
}

/** An access token of the v1 mailroom, bound to one agent address. */
export interface V1TokensTable {
  /** Hex SHA-256 of the token the agent sends as `Authorization: token …`. */
  token_hash: string;
  address: string;
  created_at: number;
  expires_at: number;
}

/** A challenge of the v1 mailroom issued to an agent (no user): single use. */
export interface V1ChallengesTable {
  challenge: string;
  address: string;
  expires_at: number;
}

/** A storage asset's metadata (docs/storage.md); its contents are kept apart. */
export interface StorageAssetsTable {
  id: string;
  /** The user whose storage the asset counts in. */
  user_id: string;
  /** The agent that created it, if an agent did. */
  agent_address: string | null;
  name: string | null;
  mime_type: string | null;
  size: number;
  /** Hex SHA-256 of the contents. */
  checksum: string;
  /** When contents were last uploaded; null while it has none. */
  uploaded_at: number | null;
  /** The file in the assets directory that holds the contents; null when the database does. */
  file: string | null;
  expires_at: number;
  created_at: number;
  updated_at: number;
}

/** An asset's contents, when they are kept in the database. */
export interface StorageAssetContentsTable {
  asset_id: string;
  contents: Uint8Array;
}

/** An agent an asset is shared with, and what it may do with it (0/1). */
export interface StorageAssetPermissionsTable {
  asset_id: string;
  agent_address: string;
  can_read: number;
  can_write: number;
  created_at: number;
}

/** An agent registered to no one that a user lets create assets in their storage. */
export interface StorageDelegationsTable {
  agent_address: string;
  user_id: string;
  created_at: number;
}

/** One answer of the Search API, kept for a while so that a click can refer to it. */
export interface SearchPagesTable {
  seq: Generated<number>;
  /** A uuid4; pages of one search may share it. */
  search_id: string;
  /** JSON: the request as it was asked. */
  request: string;
  /** JSON array text of the addresses answered, in order. */
  addresses: string;
  page_offset: number;
  /** How many listings matched in all. */
  total: number;
  created_at: number;
  expires_at: number;
}

/** An agent a client selected among the answers of a search (`POST /v1/search/agents/click`). */
export interface SearchClicksTable {
  seq: Generated<number>;
  search_id: string;
  address: string;
  /** mainnet or testnet, as the client said. */
  contract: string;
  page_index: number;
  created_at: number;
  expires_at: number;
}

/** A team: an owner like a user (its id is a row of `users`), with a slug and a name. */
export interface TeamsTable {
  id: string;
  slug: string;
  name: string;
  created_at: number;
}

/** Who may act in a team's name, and with which role ('owner' or 'member'). */
export interface TeamMembersTable {
  team_id: string;
  user_id: string;
  role: string;
  added_at: number;
}

/** An agent Agentry runs for its owner (docs/hosting.md), beside its ordinary listing. */
export interface HostedAgentsTable {
  address: string;
  owner_id: string;
  /** `mainnet` or `testnet`, as the owner chose. */
  network: string;
  /** The agent's seed, sealed with the hosting key; never answered. */
  seed_ciphertext: string;
  /** The code as the owner put it: a JSON string of a list of files; null before any. */
  code: string | null;
  /** Hex SHA-256 of `code`. */
  code_digest: string | null;
  code_updated_at: number | null;
  /** One more at each change of the code or the profile. */
  revision: number;
  /** What the owner asked for: `running` or `stopped`. */
  desired_state: string;
  /** What the agent is: `stopped`, `compiling`, `running`, `crashed` or `failed`. */
  state: string;
  /** Why it is in that state, for its owner; null when there is nothing to say. */
  state_reason: string | null;
  state_changed_at: number;
  /** The runner that holds the agent, until `lease_expires_at`; null when none does. */
  runner_id: string | null;
  lease_expires_at: number | null;
  /** Restarts since the owner last started it. */
  restarts: number;
  created_at: number;
}

/** A hosted agent's secret, given to its process as an environment variable. */
export interface HostingSecretsTable {
  address: string;
  /** A Python identifier. */
  name: string;
  /** The value, sealed with the hosting key. */
  ciphertext: string;
  created_at: number;
}

/** A hosted agent's key-value storage (its `ctx.storage`). */
export interface HostedStorageTable {
  address: string;
  key: string;
  value: string;
  updated_at: number;
}

/** A line of a hosted agent's output or of what happened to it. */
export interface HostedLogsTable {
  id: Generated<number>;
  address: string;
  time: number;
  /** `trce`, `debg`, `info` or `erro`. */
  level: string;
  /** `execution` (the agent's output) or `system` (what the runner did). */
  type: string;
  entry: string;
}

/** A process that runs hosted agents, and when it was last heard of. */
export interface HostingRunnersTable {
  id: string;
  host: string;
  seen_at: number;
  /** How many agents it runs at most. */
  capacity: number;
}

export interface ChatIdentitiesTable {
  /** The user or team that chats from it. */
  owner_id: string;
  address: string;
  /** The identity's private key (hex), sealed with the server's sealing key. */
  key_ciphertext: string;
  created_at: number;
}

export interface ChatSessionsTable {
  id: string;
  owner_id: string;
  /** The chat identity the owner speaks as in this session. */
  identity: string;
  /** The agent spoken to. */
  agent: string;
  created_at: number;
  updated_at: number;
  ended_at: number | null;
}

export interface ChatEntriesTable {
  id: Generated<number>;
  session_id: string;
  at: number;
  /** `out`: from the owner to the agent; `in`: from the agent. */
  direction: 'out' | 'in';
  /** `message`, `acknowledgement` or `failure` (a message that could not be delivered). */
  kind: 'message' | 'acknowledgement' | 'failure';
  /** The chat message's id (for an acknowledgement: the id it acknowledges). */
  msg_id: string | null;
  /** The message's contents as JSON (ChatMessage.content); null for the others. */
  content: string | null;
  /** What became of it, in words (a failure's reason, an acknowledgement's metadata). */
  detail: string | null;
}

/** A hosted agent whose code raises, until it runs without an error (docs/hosting.md, "Errors"). */
export interface HostedFailuresTable {
  address: string;
  /** The first error. */
  began_at: number;
  /** The latest error. */
  last_at: number;
  /** Errors its code wrote since the first. */
  errors: number;
  /** Crashes of its process (and failures to start) since the first. */
  crashes: ColumnType<number, number | undefined, number>;
  /** The latest error's text. */
  error: string | null;
  /** The timeline row that stands for the failure. */
  entry_id: number | null;
}

/** A proxy agent whose forwards are failing, while they are (docs/mailbox.md, "Kept forwards"). */
export interface ForwardOutagesTable {
  address: string;
  /** The first failed forward. */
  began_at: number;
  /** The latest failed forward. */
  last_failed_at: number;
  /** Attempts of the back-off that failed: the wait before the next one doubles with each. */
  failures: number;
  /** Messages that could not be forwarded while it lasts. */
  messages: number;
  /** Why the latest forward failed. */
  error: string | null;
  /** When the next attempt is due (the end of its claim while one is under way). */
  next_at: number;
  /** The agent's timeline row (`agent_activity`) that stands for the outage. */
  entry_id: number | null;
}

/** An agent its owner asked Agentry to probe (docs/activity.md, "Health"). */
export interface AgentProbesTable {
  address: string;
  /** How often a probe is sent. */
  interval_seconds: number;
  next_probe_at: number;
  /** The chat session the probes are sent in (from the owner's chat identity); null before any. */
  session_id: string | null;
  /** The probe waiting for its answer (its chat message id), and when it was sent. */
  probe_msg_id: string | null;
  probe_sent_at: number | null;
  /** 1: it answers; 0: it stopped answering; null: not known yet. */
  healthy: number | null;
  /** Probes not answered in a row. */
  failures: ColumnType<number, number | undefined, number>;
  last_probe_at: number | null;
  last_answered_at: number | null;
  last_latency_ms: number | null;
  /** Why the last probe went unanswered, in words. */
  last_failure: string | null;
  created_at: number;
}

/** What became of one probe. */
export interface AgentProbeResultsTable {
  id: Generated<number>;
  address: string;
  sent_at: number;
  /** 1: answered in time; 0: not. */
  answered: number;
  latency_ms: number | null;
}

/**
 * The chat session an agent's probes were sent in, after its owner turned them off: its entries
 * are pruned as a live probe session's are, until none is left (docs/activity.md, "Health").
 */
export interface RetiredProbeSessionsTable {
  session_id: string;
  address: string;
  retired_at: number;
}

export interface McpSessionsTable {
  id: string;
  /** The owner the session acts for: the key's user, or the team `x-team` named. */
  owner_id: string;
  /** The API key that initialized it: every request of the session must carry it. */
  key_id: string;
  client_name: string | null;
  client_version: string | null;
  protocol_version: string;
  created_at: number;
  last_seen_at: number;
}

/** An agent its owner serves over A2A (docs/a2a.md); no row: A2A is off for it. */
export interface A2aAccessTable {
  address: string;
  /** `private`: callers with an API key of this Agentry; `public`: anyone. */
  access: 'private' | 'public';
  updated_at: number;
}

/** An A2A task, as the A2A SDK's task store writes it (its columns; its JSON encodings). */
export interface A2aTasksTable {
  /** The agent's address. */
  tenant: string;
  /** Who called: the caller's owner id, or the SDK's name for an anonymous caller. */
  owner: string;
  id: string;
  context_id: string;
  status_last_updated: number | string;
  status_state: string | null;
  status: string | null;
  artifacts: string | null;
  history: string | null;
  metadata: string | null;
  protocol_version: string | null;
}

/** The chat session an A2A conversation of a caller with an agent is carried in. */
export interface A2aContextsTable {
  agent: string;
  caller: string;
  context_id: string;
  session_id: string;
  created_at: number;
}

/** An external A2A agent registered by its card's URL (docs/a2a.md, "Inward"). */
export interface A2aRemoteAgentsTable {
  /** The `agent1…` address Agentry holds the key of. */
  address: string;
  owner_id: string;
  card_url: string;
  /** The card as last read (JSON, A2A 1.0 shape). */
  card: string;
  /** The JSON-RPC endpoint the card names. */
  rpc_url: string;
  /** The A2A version spoken at `rpc_url` (`1.0` or `0.3`). */
  protocol_version: string;
  /** The address's private key (hex), sealed with the server's sealing key. */
  key_ciphertext: string;
  card_read_at: number;
  created_at: number;
}

/** This instance's agent key (docs/federation.md): one row, made on first need. */
export interface FederationIdentityTable {
  /** Always 1: there is one identity. */
  id: number;
  address: string;
  /** The private key (hex), sealed with the server's sealing key. */
  key_ciphertext: string;
  created_at: number;
}

/** An agent its owner publishes to the peers and upstreams; no row: not published. */
export interface PublishedAgentsTable {
  address: string;
  published_at: number;
}

/** Where a server process on this database listens (migration 0034). */
export interface ServersTable {
  id: string;
  /** Where it listens, as its own machine reaches it: http://127.0.0.1:8000. */
  url: string;
  /** The name of its machine. */
  host: string;
  pid: number;
  started_at: number;
  seen_at: number;
}
