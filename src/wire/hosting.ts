import { Type, type Static } from '@sinclair/typebox';
import { AgentAddress, Nullable, StringEnum, Timestamp } from './common.js';
import { TeamSlug } from './teams.js';

/**
 * The Hosting API (docs/hosting.md): the v1 shapes of the hosted Agentverse, field for field,
 * with a few Agentry additions that no client of those shapes is disturbed by.
 */

export const AGENT_NETWORKS = ['mainnet', 'testnet'] as const;
const AgentNetwork = StringEnum(AGENT_NETWORKS, {
  default: 'testnet',
  description: 'the network the agent registers on',
});

export const HOSTED_STATE_NAMES = ['stopped', 'compiling', 'running', 'crashed', 'failed'] as const;
/** The hosted Agentverse's levels, and `warn` (Agentry's) for the lines an agent logs as warnings. */
export const LOG_LEVELS = ['trce', 'debg', 'info', 'warn', 'erro'] as const;
export const LOG_TYPES = ['execution', 'system'] as const;

/** The longest storage key; also the longest cursor of a storage list (it is a key). */
export const STORAGE_KEY_MAX_LENGTH = 512;
/** The longest code text a request may carry, in characters (the service counts bytes). */
export const CODE_MAX_LENGTH = 1024 * 1024;

const NoCache = Type.Boolean({
  default: false,
  description: 'accepted for compatibility; every answer is current',
});

/** `no_cache`, which every call of the hosted service takes. */
export const HostingQuery = Type.Object({ no_cache: Type.Optional(NoCache) });

export const HostedAgentParams = Type.Object({ address: AgentAddress });
export const HostingTeamParams = Type.Object({ slug: TeamSlug });
export const TeamHostedAgentParams = Type.Object({ slug: TeamSlug, address: AgentAddress });

const StorageKey = Type.String({
  minLength: 1,
  maxLength: STORAGE_KEY_MAX_LENGTH,
  description: 'a key of the agent’s storage',
});
export const StorageParams = Type.Object({ address: AgentAddress, key: StorageKey });
export const TeamStorageParams = Type.Object({
  slug: TeamSlug,
  address: AgentAddress,
  key: StorageKey,
});

const SecretName = Type.String({
  minLength: 1,
  maxLength: 128,
  description: 'a Python identifier; the agent reads it as an environment variable of that name',
});
export const SecretParams = Type.Object({ address: AgentAddress, name: SecretName });
export const TeamSecretParams = Type.Object({
  slug: TeamSlug,
  address: AgentAddress,
  name: SecretName,
});

const Name = Type.String({ minLength: 1, maxLength: 32, description: 'the agent’s public name' });
const Readme = Type.String({ maxLength: 80_000 });
const AvatarUrl = Type.String({ maxLength: 4000 });
const ShortDescription = Type.String({ maxLength: 300 });

/** `POST /v1/hosting/agents` and `…/duplicate`. */
export const NewAgent = Type.Object({
  name: Name,
  readme: Type.Optional(Nullable(Readme)),
  avatar_url: Type.Optional(Nullable(AvatarUrl)),
  short_description: Type.Optional(Nullable(ShortDescription)),
  network: Type.Optional(AgentNetwork),
});
export type NewAgent = Static<typeof NewAgent>;

/** `PUT /v1/hosting/agents/{address}`: null or left out keeps what is stored. */
export const UpdateAgent = Type.Object({
  name: Type.Optional(Nullable(Name)),
  readme: Type.Optional(Nullable(Readme)),
  avatar_url: Type.Optional(Nullable(AvatarUrl)),
  short_description: Type.Optional(Nullable(ShortDescription)),
});
export type UpdateAgent = Static<typeof UpdateAgent>;

export const AgentListQuery = Type.Object({
  cursor: Type.Optional(
    Type.String({
      pattern: '^[0-9]{1,9}$',
      description: 'where the page starts: a `next_cursor` of an earlier answer',
    }),
  ),
  name: Type.Optional(
    Type.String({ maxLength: 100, description: 'only agents whose name holds this text' }),
  ),
  no_cache: Type.Optional(NoCache),
  sort_by: Type.Optional(
    Type.String({
      pattern: '^(-?)(modified|created|name)$',
      description: 'the order: created (the default), modified or name; a leading - reverses it',
    }),
  ),
  direction: Type.Optional(
    Type.String({ pattern: '^(asc|desc)$', default: 'asc', description: 'asc or desc' }),
  ),
});
export type AgentListQuery = Static<typeof AgentListQuery>;

const Prefix = Nullable(
  StringEnum(['agent', 'test-agent'] as const, {
    description: 'agent on mainnet, test-agent on testnet',
  }),
);

/** What both agent shapes show. */
const summaryFields = {
  name: Type.String(),
  address: Type.String(),
  domain: Nullable(Type.String()),
  prefix: Prefix,
  running: Type.Boolean({
    description:
      'whether the agent is meant to run and has not failed (its owner started it); `state` says what it is doing',
  }),
  compiled: Nullable(
    Type.Boolean({
      description:
        'true while the current code runs, false once the agent failed; null otherwise (not known yet, or no code)',
    }),
  ),
  code_digest: Nullable(Type.String({ description: 'hex SHA-256 of the code text' })),
  wallet_address: Nullable(Type.String()),
  code_update_timestamp: Nullable(Timestamp),
  creation_timestamp: Nullable(Timestamp),
  avatar_url: Nullable(Type.String()),
  // Agentry's additions.
  state: StringEnum(HOSTED_STATE_NAMES, {
    description:
      'Agentry: what the agent is doing: stopped, compiling (starting), running, crashed (restarting) or failed (given up)',
  }),
  state_reason: Nullable(
    Type.String({ description: 'Agentry: why it is in that state (an exit, a crash loop, …)' }),
  ),
};

export const AgentSummaryV1 = Type.Object(summaryFields);

export const AgentV1 = Type.Object({
  ...summaryFields,
  maintainer_id: Nullable(Type.String()),
  revision: Type.Integer({ description: 'one more at each change of the code or the profile' }),
  readme: Nullable(Type.String()),
  short_description: Nullable(Type.String()),
  metadata: Nullable(Type.Object({}, { additionalProperties: true })),
  // Agentry's additions.
  network: AgentNetwork,
  restarts: Type.Integer({ description: 'Agentry: restarts since its owner last started it' }),
  state_changed_timestamp: Timestamp,
});
export type AgentV1 = Static<typeof AgentV1>;

export const AgentList = Type.Object({
  items: Type.Array(AgentSummaryV1),
  next_cursor: Nullable(Type.String({ description: 'the next page’s cursor; null at the end' })),
});

export const PublicAgentV1 = Type.Object({
  name: Type.String(),
  author_username: Type.String(),
  address: Type.String(),
  domain: Nullable(Type.String()),
  prefix: Prefix,
  running: Type.Boolean(),
  readme: Nullable(Type.String()),
  short_description: Nullable(Type.String()),
  last_updated_at: Timestamp,
  created_at: Timestamp,
  maintainer_id: Nullable(Type.String()),
  avatar_url: Nullable(Type.String()),
  metadata: Nullable(Type.Object({}, { additionalProperties: true })),
});

export const AgentCode = Type.Object({
  digest: Nullable(Type.String()),
  code: Nullable(Type.String({ description: 'the code as it was put: a JSON list of files' })),
  timestamp: Nullable(Timestamp),
});

export const UpdateAgentCode = Type.Object({
  code: Type.String({
    maxLength: CODE_MAX_LENGTH,
    description:
      'a JSON string of a list of 1 to 50 files {"name", "value", "language"}, one named agent.py, at most 1 MiB',
  }),
});

export const AgentCodeDigest = Type.Object({
  digest: Type.String({ description: 'hex SHA-256 of the code text' }),
});

export const AgentLog = Type.Object({
  log_timestamp: Timestamp,
  log_entry: Type.String(),
  log_type: StringEnum(LOG_TYPES),
  log_level: StringEnum(LOG_LEVELS),
});
export const AgentLogs = Type.Array(AgentLog, { description: 'oldest first, the newest last' });

export const UpdateAgentNetwork = Type.Object({ network: Type.Optional(AgentNetwork) });

export const SecretCreate = Type.Object({
  address: AgentAddress,
  name: SecretName,
  secret: Type.String({ maxLength: 65_536, description: 'the value; never answered' }),
});

export const Secret = Type.Object({
  name: Type.String(),
  secret: Type.String({ description: 'always masked' }),
  timestamp: Nullable(Timestamp),
  address: Type.String({ description: 'Agentry: the agent the secret belongs to' }),
});

export const SecretList = Type.Object({ secrets: Type.Array(Secret) });

export const StorageItem = Type.Object({ key: Type.String(), value: Type.String() });

export const StorageList = Type.Object({
  items: Type.Array(StorageItem, { description: 'in key order' }),
  next_cursor: Nullable(Type.String({ description: 'the next page’s cursor; null at the end' })),
});

export const StorageQuery = Type.Object({
  cursor: Type.Optional(
    Type.String({
      maxLength: STORAGE_KEY_MAX_LENGTH,
      description: 'where the page starts: a `next_cursor` of an earlier answer',
    }),
  ),
  no_cache: Type.Optional(NoCache),
});

export const StorageItemUpdate = Type.Object({ value: Type.String() });

export const HostingStatus = Type.Object(
  {
    ready: Type.Boolean({ description: 'whether hosted agents can run on this deployment' }),
    runners: Type.Integer({ minimum: 0, description: 'runners alive on this database' }),
    python: Nullable(
      Type.String({ description: 'the interpreter this server runs hosted agents with' }),
    ),
    reason: Nullable(Type.String({ description: 'why hosted agents cannot run; null when ready' })),
    enable: Nullable(
      Type.String({
        description:
          'the one command (or setting) with which the operator lets them run; null when ready',
      }),
    ),
  },
  { description: 'Whether hosted agents can run here (Agentry’s addition)' },
);
