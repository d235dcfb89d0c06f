import { AgentStatus } from './activity.js';
import { Type, type Static } from '@sinclair/typebox';
import {
  AgentAddress,
  BoundedInteger,
  Endpoint,
  MAX_OFFSET,
  Nullable,
  StringEnum,
  Timestamp,
  WireString,
} from './common.js';

const Name = Type.String({ minLength: 1, maxLength: 32, description: "Agent's public name" });

export const AgentHandle = Type.String({
  minLength: 1,
  maxLength: 40,
  pattern: '^[a-z0-9]+(-[a-z0-9]+)*$',
  description: 'Unique across the service: lower-case letters and digits in dash-separated words',
});

const Handle = Nullable(AgentHandle);

const URL_MAX_LENGTH = 4000;

const AgentType = StringEnum(['uagent', 'a2a'] as const, { default: 'uagent' });

/** The profile as stored and shown: every member present. */
export const AgentProfile = Type.Object({
  description: Type.String(),
  readme: Type.String(),
  avatar_url: Type.String(),
  banner_url: Type.String(),
  starter_prompts: Type.Array(Type.String()),
});
export type AgentProfile = Static<typeof AgentProfile>;

/** The profile as given: members left out are empty. */
const ProfileInput = Type.Object({
  description: Type.Optional(Type.String({ maxLength: 300, default: '' })),
  readme: Type.Optional(Type.String({ maxLength: 80000, default: '' })),
  // Null is empty: the agentverse-sdk sends an A2A agent card's absent icon as null.
  avatar_url: Type.Optional(Nullable(Type.String({ maxLength: URL_MAX_LENGTH, default: '' }))),
  banner_url: Type.Optional(Nullable(Type.String({ maxLength: URL_MAX_LENGTH, default: '' }))),
  starter_prompts: Type.Optional(Type.Array(Type.String(), { default: [] })),
});
export type ProfileInput = Static<typeof ProfileInput>;

const KeepFailedForwards = Type.Boolean({
  description:
    'Whether the proxy keeps a message it cannot forward (the agent down, slow or failing) in the agent’s mailbox and forwards it again; off: the sender hears the failure',
});

const Metadata = Nullable(
  Type.Object({}, { additionalProperties: true, description: 'Free-form JSON object' }),
);

export const RegistrationRequest = Type.Object({
  address: AgentAddress,
  name: Name,
  handle: Type.Optional(Handle),
  url: Type.Optional(
    Nullable(
      Type.String({ maxLength: URL_MAX_LENGTH, description: 'Where the proxy forwards messages' }),
    ),
  ),
  agent_type: Type.Optional(AgentType),
  profile: Type.Optional(ProfileInput),
  endpoints: Type.Optional(Type.Array(Endpoint, { default: [] })),
  protocols: Type.Optional(Type.Array(Type.String(), { default: [], description: 'Digests' })),
  metadata: Type.Optional(Metadata),
  keep_failed_forwards: Type.Optional(
    Type.Boolean({
      description: `${KeepFailedForwards.description}. Left out: on for a new agent, unchanged for one registered already`,
    }),
  ),
});
export type RegistrationRequest = Static<typeof RegistrationRequest>;

const BATCH_MAX_AGENTS = 1000;

export const BatchRegistrationRequest = Type.Object({
  agents: Type.Optional(
    Type.Array(RegistrationRequest, { maxItems: BATCH_MAX_AGENTS, default: [] }),
  ),
});

export const AgentUpdates = Type.Object({
  address: WireString('agent-address', {
    maxLength: 66,
    description: 'Must equal the address in the path',
  }),
  name: Type.Optional(Name),
  handle: Type.Optional(Handle),
  redirect_url: Type.Optional(Nullable(Type.String({ maxLength: URL_MAX_LENGTH }))),
  keep_failed_forwards: Type.Optional(KeepFailedForwards),
  profile: Type.Optional(
    Type.Object(ProfileInput.properties, {
      description: 'Replaces the whole profile; members left out become empty',
    }),
  ),
});
export type AgentUpdates = Static<typeof AgentUpdates>;

export const AgentRecord = Type.Object({
  address: Type.String(),
  name: Type.String(),
  handle: Nullable(Type.String()),
  redirect_url: Nullable(Type.String()),
  agent_type: Type.String(),
  profile: AgentProfile,
  endpoints: Type.Array(Endpoint),
  protocols: Type.Array(Type.String()),
  metadata: Metadata,
  keep_failed_forwards: KeepFailedForwards,
  mailbox: Type.Object({ pending_messages: Type.Integer(), bytes_stored: Type.Integer() }),
  registered_at: Timestamp,
  updated_at: Timestamp,
  status: AgentStatus,
});
export type AgentRecord = Static<typeof AgentRecord>;

export const AgentList = Type.Array(AgentRecord);

export const AGENTS_PAGE_SIZE = 30;

export const ListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: AGENTS_PAGE_SIZE })),
  offset: Type.Optional(BoundedInteger({ maximum: MAX_OFFSET, default: 0 })),
});
