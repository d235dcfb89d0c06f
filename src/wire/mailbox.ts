import { Type, type Static } from '@sinclair/typebox';
import type { EnvelopeFields } from '../crypto/index.js';
import type { PendingMessage } from '../store/repositories/mailbox.js';
import { AgentAddress, isoTimestamp, Nullable, WireString } from './common.js';

/** A uAgents envelope. Fields beyond these are kept and returned with it. */
export const Envelope = Type.Object(
  {
    version: Type.Integer(),
    sender: Type.String({ description: 'agent1… address, or user1… with the user’s API key' }),
    target: Type.String({ description: 'agent1… address of the recipient' }),
    session: WireString('uuid4', { description: 'version-4 UUID' }),
    schema_digest: Type.String(),
    protocol_digest: Type.Optional(Nullable(Type.String())),
    payload: Type.Optional(Nullable(Type.String({ description: 'base64 of a UTF-8 JSON text' }))),
    expires: Type.Optional(Nullable(Type.Integer({ description: 'unix seconds' }))),
    nonce: Type.Optional(Nullable(Type.Integer())),
    signature: Type.Optional(Nullable(Type.String({ description: 'bech32 "sig1…" signature' }))),
  },
  { additionalProperties: true },
);
/** An envelope as submitted: the protocol's fields and whatever else the sender added. */
export type Envelope = Static<typeof Envelope> & EnvelopeFields;

export const StoredEnvelope = Type.Object({
  uuid: Type.String({ description: 'version-4 UUID; the same envelope always gets the same one' }),
  envelope: Envelope,
  received_at: Type.String({ description: 'ISO-8601 with offset' }),
  expires_at: Type.String({ description: 'ISO-8601 with offset' }),
});

/**
 * A stored message as the StoredEnvelope JSON text. The envelope is JSON text already: it is
 * spliced into the answer rather than parsed and serialised again on every poll.
 */
export function storedEnvelopeJson(message: PendingMessage): string {
  return `{"uuid":"${message.uuid}","envelope":${message.envelope},"received_at":"${isoTimestamp(message.received_at)}","expires_at":"${isoTimestamp(message.expires_at)}"}`;
}

export const MailboxQuery = Type.Object({
  limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }),
  offset: Type.Integer({ minimum: 0, default: 0 }),
});
export type MailboxPage = Static<typeof MailboxQuery>;

export const MessageParams = Type.Object({
  address: AgentAddress,
  uuid: WireString('uuid', { description: 'the message’s uuid' }),
});
