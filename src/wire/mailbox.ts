import { Type, type Static } from '@sinclair/typebox';
import type { EnvelopeFields } from '../crypto/index.js';
import { AgentAddress, BoundedInteger, MAX_OFFSET, Nullable, WireString } from './common.js';

/**
 * A uAgents envelope, in the form its recipient's client parses (docs/mailbox.md, "What is
 * admitted"). Fields beyond these are accepted and dropped: they are not signed, and the
 * client ignores them.
 */
export const Envelope = Type.Object(
  {
    version: BoundedInteger(),
    sender: WireString('envelope-sender', {
      description: 'agent1… address, or user1… with that user’s API key; lower case',
    }),
    target: WireString('envelope-target', {
      description: 'agent1… address of the recipient; lower case',
    }),
    session: WireString('uuid4', { description: 'version-4 UUID' }),
    schema_digest: WireString('schema-digest', { description: 'model:<64 hex digits>' }),
    protocol_digest: Type.Optional(
      Nullable(WireString('protocol-digest', { description: 'proto:<64 hex digits>' })),
    ),
    payload: Type.Optional(
      Nullable(WireString('base64-utf8', { description: 'base64 of a UTF-8 JSON text' })),
    ),
    expires: Type.Optional(Nullable(BoundedInteger({ description: 'unix seconds' }))),
    nonce: Type.Optional(Nullable(BoundedInteger())),
    signature: Type.Optional(Nullable(Type.String({ description: 'bech32 "sig1…" signature' }))),
  },
  { additionalProperties: true },
);
/** An envelope as submitted: the protocol's fields and whatever else the sender added. */
export type Envelope = Static<typeof Envelope> & EnvelopeFields;

/** The envelope's fields, in the order they are stored and served. */
const ENVELOPE_FIELDS = [
  'version',
  'sender',
  'target',
  'session',
  'schema_digest',
  'protocol_digest',
  'payload',
  'expires',
  'nonce',
  'signature',
] as const satisfies readonly (keyof EnvelopeFields)[];

/** The envelope's own fields, as sent (absent ones stay absent); anything else is left out. */
export function envelopeFields(envelope: EnvelopeFields): EnvelopeFields {
  const out: Record<string, unknown> = {};
  for (const field of ENVELOPE_FIELDS) {
    if (envelope[field] !== undefined) out[field] = envelope[field];
  }
  return out as unknown as EnvelopeFields;
}

export const StoredEnvelope = Type.Object({
  uuid: Type.String({ description: 'version-4 UUID; the same envelope always gets the same one' }),
  envelope: Envelope,
  received_at: Type.String({ description: 'ISO-8601 with offset' }),
  expires_at: Type.String({ description: 'ISO-8601 with offset' }),
});
export type StoredEnvelope = Static<typeof StoredEnvelope>;

export const QuarantinedEnvelope = Type.Object({
  uuid: Type.String({ description: 'the uuid the message was listed under' }),
  reason: Type.String({ description: 'why the agent’s client cannot take it' }),
  envelope: Type.String({ description: 'the stored text, as it was' }),
  received_at: Type.String({ description: 'ISO-8601 with offset' }),
  expires_at: Type.String({ description: 'ISO-8601 with offset' }),
  quarantined_at: Type.String({ description: 'ISO-8601 with offset' }),
});
export type QuarantinedEnvelope = Static<typeof QuarantinedEnvelope>;

export const MailboxQuery = Type.Object({
  limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }),
  offset: BoundedInteger({ maximum: MAX_OFFSET, default: 0 }),
});
export type MailboxPage = Static<typeof MailboxQuery>;

export const MessageParams = Type.Object({
  address: AgentAddress,
  uuid: WireString('uuid', { description: 'the message’s uuid' }),
});
