import { Type, type Static } from '@sinclair/typebox';
import {
  AgentAddress,
  BoundedInteger,
  MAX_OFFSET,
  Nullable,
  StringEnum,
  WireString,
} from './common.js';

/** The events a trace row may record. */
export const DELIVERY_EVENTS = [
  'submitted',
  'stored',
  'refused',
  'polled',
  'deleted',
  'expired',
  'quarantined',
  'forwarded',
  'delivered',
  'interaction',
] as const;

/** The detail of a `forwarded` row of a kept message that went through (its `delivered` row follows). */
export const KEPT_FORWARD_DETAIL = 'forwarded again after it was kept';

/**
 * The detail of the `expired` row of a kept message that expired still waiting to be
 * forwarded: its agent could not be reached (the agent's outage counts it).
 */
export const EXPIRED_UNFORWARDED_DETAIL = 'never forwarded: its agent could not be reached';

export const DeliveryQuery = Type.Object({
  since: Type.Optional(
    Type.String({
      pattern: '^\\d{4}-\\d{2}-\\d{2}',
      maxLength: 64,
      description: 'only events at or after this moment (ISO-8601)',
    }),
  ),
  status: Type.Optional(StringEnum(DELIVERY_EVENTS, { description: 'only events of this kind' })),
  kind: Type.Optional(
    StringEnum(['message', 'interaction'] as const, {
      description: 'only message events, or only reported interactions',
    }),
  ),
  limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }),
  offset: BoundedInteger({ maximum: MAX_OFFSET, default: 0 }),
});

export const DeliveryParams = Type.Object({
  address: AgentAddress,
  uuid: WireString('uuid', { description: 'the message’s uuid' }),
});

export const DigestQuery = Type.Object({
  digest: Type.String({
    pattern: '^[0-9a-fA-F]{64}$',
    description: 'the envelope digest (sha256 of its signing bytes), hex',
  }),
  target: AgentAddress,
});

export const DeliveryEventView = Type.Object({
  address: Type.String({ description: 'the agent whose trace this is (the message’s target)' }),
  event: StringEnum(DELIVERY_EVENTS),
  at: Type.String({ description: 'ISO-8601 with offset' }),
  uuid: Nullable(Type.String({ description: 'the message’s uuid' })),
  digest: Nullable(Type.String({ description: 'the envelope digest, hex' })),
  sender: Nullable(Type.String()),
  size: Nullable(Type.Integer({ description: 'bytes of the envelope' })),
  status_code: Nullable(Type.Integer({ description: 'what the target answered a forward' })),
  latency_ms: Nullable(Type.Integer({ description: 'how long a forward took' })),
  detail: Nullable(
    Type.String({
      description:
        'why (refusal, quarantine, failed forward), that the proxy kept a message (stored), who polled (agent, user), or an interaction’s target and session',
    }),
  ),
});
export type DeliveryEventView = Static<typeof DeliveryEventView>;
