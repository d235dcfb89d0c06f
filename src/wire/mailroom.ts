import { Type, type Static } from '@sinclair/typebox';
import { AgentAddress, Nullable, StringEnum, WireString } from './common.js';
import { StoredEnvelope } from './mailbox.js';

/**
 * The v1 mailroom: the calls of uAgents 0.22 and earlier (docs/mailbox.md, "v1 mailroom"),
 * field for field as that client builds and reads them.
 */

/** Long enough for any challenge this service issues; a longer one is unknown anyway. */
const CHALLENGE_MAX_LENGTH = 256;
/** A bech32 signature of 64 bytes is 110 characters. */
const SIGNATURE_MAX_LENGTH = 256;
const URL_MAX_LENGTH = 4000;

export const V1ChallengeRequest = Type.Object({ address: AgentAddress });

export const V1ChallengeResponse = Type.Object({
  challenge: Type.String({ description: 'to be signed by the agent, once, within minutes' }),
});

const Challenge = Type.String({ maxLength: CHALLENGE_MAX_LENGTH });
const ChallengeSignature = Type.String({
  maxLength: SIGNATURE_MAX_LENGTH,
  description: 'bech32 "sig1…" signature of the challenge by the agent’s key',
});

export const V1ChallengeProof = Type.Object({
  address: AgentAddress,
  challenge: Challenge,
  challenge_response: ChallengeSignature,
});
export type V1ChallengeProof = Static<typeof V1ChallengeProof>;

export const V1AccessToken = Type.Object({
  access_token: Type.String({
    description: 'sent as `Authorization: token <access_token>` to the v1 mailbox',
  }),
  expiry: Type.String({ description: 'ISO-8601 with offset; a 401 after it asks for a new one' }),
});

const V1AgentType = StringEnum(['mailbox', 'proxy', 'custom'] as const);

export const V1RegistrationRequest = Type.Object({
  address: AgentAddress,
  prefix: Type.Optional(
    Nullable(StringEnum(['agent', 'test-agent'] as const, { description: 'the agent’s network' })),
  ),
  challenge: Challenge,
  challenge_response: ChallengeSignature,
  agent_type: V1AgentType,
  endpoint: Type.Optional(
    Nullable(
      Type.String({
        maxLength: URL_MAX_LENGTH,
        description: 'Where the proxy forwards messages (a proxy agent’s own URL)',
      }),
    ),
  ),
});
export type V1RegistrationRequest = Static<typeof V1RegistrationRequest>;

export const V1AgentUpdates = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 80 }),
  readme: Type.Optional(Nullable(Type.String({ maxLength: 80000 }))),
  avatar_url: Type.Optional(Nullable(Type.String({ maxLength: URL_MAX_LENGTH }))),
  short_description: Type.Optional(Nullable(Type.String({ maxLength: 300 }))),
  agent_type: Type.Optional(Nullable(V1AgentType)),
});
export type V1AgentUpdates = Static<typeof V1AgentUpdates>;

export const V1Agent = Type.Object({
  address: Type.String(),
  name: Type.String(),
  pending_messages: Type.Integer(),
  bytes_transferred: Type.Integer(),
  previous_bytes_transferred: Type.Integer(),
  readme: Nullable(Type.String()),
  avatar_url: Nullable(Type.String()),
  short_description: Nullable(Type.String()),
  agent_type: V1AgentType,
});
export type V1Agent = Static<typeof V1Agent>;

export const V1_PAGE_SIZE = 50;

/** A page of a v1 list (`fastapi-pagination`'s `page` and `size`). */
export const V1PageQuery = Type.Object({
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000, default: 1 })),
  size: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: V1_PAGE_SIZE })),
});

export const V1AgentPage = Type.Object({
  items: Type.Array(V1Agent),
  total: Nullable(Type.Integer()),
  page: Type.Integer(),
  size: Type.Integer(),
  pages: Nullable(Type.Integer()),
});

export const V1MailboxPage = Type.Object({
  items: Type.Array(StoredEnvelope),
  total: Nullable(Type.Integer()),
  page: Type.Integer(),
  size: Type.Integer(),
  pages: Nullable(Type.Integer()),
});

export const V1MessageParams = Type.Object({
  uuid: WireString('uuid', { description: 'the message’s uuid' }),
});
