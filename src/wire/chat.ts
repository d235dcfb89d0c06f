import { Type, type Static } from '@sinclair/typebox';
import {
  AgentAddress,
  BoundedInteger,
  MAX_OFFSET,
  Nullable,
  StringEnum,
  Timestamp,
  WireString,
} from './common.js';

// ---- The chat protocol (uagents_core.contrib.protocols.chat, AgentChatProtocol 0.3.0) ----

/** The chat protocol's digest, as uAgents computes it from its specification. */
export const CHAT_PROTOCOL_DIGEST =
  'proto:30a801ed3a83f9a0ff0a9f1e6fe958cb91da1fc2218b153df7b6cbf87bd33d62';
/** `ChatMessage`'s schema digest. */
export const CHAT_MESSAGE_DIGEST =
  'model:2601825997203ee07dbb9ff6e7c71ae7bdaf6a7c8b817361f2f88f4b29c68d0c';
/** `ChatAcknowledgement`'s schema digest. */
export const CHAT_ACKNOWLEDGEMENT_DIGEST =
  'model:741eb75692abbeb43c131e364ad939af23f14e8288ba0ec3df130843ef79bd7f';

const uuid = Type.String({ maxLength: 64 });
const stringMap = Type.Record(Type.String(), Type.String());
const Resource = Type.Object({ uri: Type.String(), metadata: stringMap });

/** One element of a chat message's content, as the protocol defines them. */
export const ChatContent = Type.Union([
  Type.Object({ type: Type.Literal('text'), text: Type.String() }),
  Type.Object({
    type: Type.Literal('resource'),
    resource_id: uuid,
    resource: Type.Union([Resource, Type.Array(Resource)]),
  }),
  Type.Object({ type: Type.Literal('metadata'), metadata: stringMap }),
  Type.Object({ type: Type.Literal('start-session') }),
  Type.Object({ type: Type.Literal('end-session') }),
  Type.Object({ type: Type.Literal('start-stream'), stream_id: uuid }),
  Type.Object({ type: Type.Literal('end-stream'), stream_id: uuid }),
]);
export type ChatContent = Static<typeof ChatContent>;

/** `ChatMessage`, the payload of a chat envelope. */
export const ChatMessagePayload = Type.Object({
  timestamp: Type.String(),
  msg_id: uuid,
  content: Type.Array(ChatContent, { maxItems: 1000 }),
});
export type ChatMessagePayload = Static<typeof ChatMessagePayload>;

/**
 * `ChatAcknowledgement`, the payload that says a chat message arrived. uAgents sends
 * `"metadata": null` when there is none. Checked with TypeBox's `Value.Check`, which does not
 * understand the JSON-schema `type` list `Nullable` makes, so null is a union member here.
 */
export const ChatAcknowledgementPayload = Type.Object({
  timestamp: Type.String(),
  acknowledged_msg_id: uuid,
  metadata: Type.Optional(Type.Union([stringMap, Type.Null()])),
});
export type ChatAcknowledgementPayload = Static<typeof ChatAcknowledgementPayload>;

// ---- The sessions API --------------------------------------------------------------------

/** The longest text one message may carry, in characters. */
export const CHAT_TEXT_MAX_LENGTH = 16_384;
/** Files one message may carry. */
export const CHAT_RESOURCES_MAX = 8;

export const ChatIdentity = Type.Object({
  address: AgentAddress,
  created_at: Timestamp,
});
export type ChatIdentity = Static<typeof ChatIdentity>;

export const OpenChatRequest = Type.Object({
  agent: Type.String({
    minLength: 1,
    maxLength: 256,
    description: 'the agent to chat with: its address, a name it holds, or its handle',
  }),
});
export type OpenChatRequest = Static<typeof OpenChatRequest>;

export const ChatSession = Type.Object({
  id: WireString('uuid4', { description: 'the session, and the envelopes’ session' }),
  agent: AgentAddress,
  identity: AgentAddress,
  created_at: Timestamp,
  updated_at: Timestamp,
  ended_at: Nullable(Timestamp),
});
export type ChatSession = Static<typeof ChatSession>;

export const ChatSessionParams = Type.Object({ id: WireString('uuid4') });

export const ChatSessionsQuery = Type.Object({
  agent: Type.Optional(AgentAddress),
  limit: Type.Optional(BoundedInteger({ minimum: 1, maximum: 100, default: 20 })),
  offset: Type.Optional(BoundedInteger({ maximum: MAX_OFFSET, default: 0 })),
});
export type ChatSessionsQuery = Static<typeof ChatSessionsQuery>;

export const ChatResourceRequest = Type.Object({
  asset_id: WireString('uuid', { description: 'a storage asset of the caller’s' }),
  role: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
});

export const SendChatRequest = Type.Object({
  text: Type.String({ maxLength: CHAT_TEXT_MAX_LENGTH }),
  resources: Type.Optional(
    Type.Array(ChatResourceRequest, {
      maxItems: CHAT_RESOURCES_MAX,
      description: 'files sent with the text, as storage assets the agent is allowed to read',
    }),
  ),
});
export type SendChatRequest = Static<typeof SendChatRequest>;

export const CHAT_ENTRY_KINDS = ['message', 'acknowledgement', 'failure'] as const;
export type ChatEntryKind = (typeof CHAT_ENTRY_KINDS)[number];

export const ChatEntry = Type.Object({
  id: Type.String({
    description: 'the entry’s place in the session (`Last-Event-ID` on a stream)',
  }),
  session_id: Type.String(),
  at: Timestamp,
  direction: StringEnum(['out', 'in'] as const, {
    description: 'out: from the caller to the agent; in: from the agent',
  }),
  kind: StringEnum(CHAT_ENTRY_KINDS, { description: CHAT_ENTRY_KINDS.join(', ') }),
  msg_id: Nullable(Type.String({ description: 'the chat message’s id (or the one acknowledged)' })),
  text: Nullable(Type.String({ description: 'the message’s text contents, joined' })),
  content: Nullable(Type.Array(ChatContent)),
  detail: Nullable(
    Type.String({
      description: 'a failure’s reason, in words; an acknowledgement’s metadata, as JSON',
    }),
  ),
});
export type ChatEntry = Static<typeof ChatEntry>;

export const ChatEntriesQuery = Type.Object({
  after: Type.Optional(
    Type.String({ pattern: '^[0-9]{1,15}$', description: 'entries after this entry id' }),
  ),
  limit: Type.Optional(BoundedInteger({ minimum: 1, maximum: 200, default: 50 })),
});
export type ChatEntriesQuery = Static<typeof ChatEntriesQuery>;

export const SendChatAnswer = Type.Object({
  message: ChatEntry,
  failure: Nullable(ChatEntry),
});
export type SendChatAnswer = Static<typeof SendChatAnswer>;
