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
import { WEBHOOK_KINDS } from './webhook-kinds.js';

export { WEBHOOK_KINDS, type WebhookKind } from './webhook-kinds.js';

/** What a delivery may be about: a kind a hook chose, or the test a hook's owner asked for. */
export const DELIVERY_KINDS = [...WEBHOOK_KINDS, 'webhook.test'] as const;
export type WebhookDeliveryKind = (typeof DELIVERY_KINDS)[number];

export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type WebhookDeliveryStatus = (typeof WEBHOOK_DELIVERY_STATUSES)[number];

/** The longest URL a hook may have; longer ones are refused before they are stored. */
export const WEBHOOK_URL_MAX_LENGTH = 2048;
/** Agents one hook may name; more is a hook for all of them. */
export const WEBHOOK_AGENTS_MAX = 100;

const url = WireString('http-url', {
  maxLength: WEBHOOK_URL_MAX_LENGTH,
  description: 'where deliveries are POSTed: an http:// or https:// URL',
});
const kinds = Type.Array(StringEnum(WEBHOOK_KINDS, { description: WEBHOOK_KINDS.join(', ') }), {
  minItems: 1,
  maxItems: WEBHOOK_KINDS.length,
  uniqueItems: true,
});
const agents = Type.Array(AgentAddress, {
  maxItems: WEBHOOK_AGENTS_MAX,
  uniqueItems: true,
  description: 'only these agents of the caller’s; null or absent: all of them, present and future',
});
const description = Type.String({ maxLength: 200 });

export const CreateWebhookRequest = Type.Object({
  url,
  kinds,
  agents: Type.Optional(Nullable(agents)),
  description: Type.Optional(Nullable(description)),
});
export type CreateWebhookRequest = Static<typeof CreateWebhookRequest>;

/** A change of a hook: the fields given replace the stored ones; the secret stays. */
export const UpdateWebhookRequest = Type.Object({
  url: Type.Optional(url),
  kinds: Type.Optional(kinds),
  agents: Type.Optional(Nullable(agents)),
  description: Type.Optional(Nullable(description)),
});
export type UpdateWebhookRequest = Static<typeof UpdateWebhookRequest>;

/** What every answer about a hook says of it. */
const webhookFields = {
  id: Type.String(),
  url: Type.String(),
  kinds: Type.Array(StringEnum(WEBHOOK_KINDS)),
  agents: Nullable(Type.Array(Type.String(), { description: 'null: all the owner’s agents' })),
  description: Nullable(Type.String()),
  created_at: Timestamp,
  updated_at: Timestamp,
};

export const Webhook = Type.Object(webhookFields);
export type Webhook = Static<typeof Webhook>;

export const WebhookList = Type.Array(Webhook);

export const NewWebhook = Type.Object({
  ...webhookFields,
  secret: Type.String({
    description: 'signs every delivery (the agentry-signature header); it is shown this once only',
  }),
});
export type NewWebhook = Static<typeof NewWebhook>;

export const WebhookParams = Type.Object({
  id: Type.String({ pattern: '^wh_[a-z2-7]{16}$', description: 'The id of a webhook' }),
});

export const WebhookDeliveryParams = Type.Object({
  id: WebhookParams.properties.id,
  delivery: Type.String({ format: 'uuid', description: 'The id of one of its deliveries' }),
});

export const WebhookDeliveriesQuery = Type.Object({
  status: Type.Optional(StringEnum(WEBHOOK_DELIVERY_STATUSES)),
  limit: Type.Integer({ minimum: 1, maximum: 500, default: 100 }),
  offset: BoundedInteger({ maximum: MAX_OFFSET, default: 0 }),
});
export type WebhookDeliveriesQuery = Static<typeof WebhookDeliveriesQuery>;

export const WebhookDelivery = Type.Object({
  id: Type.String({ description: 'the agentry-delivery-id header, and the payload’s id' }),
  kind: StringEnum(DELIVERY_KINDS),
  agent: Nullable(Type.String({ description: 'the agent it is about; null for a test' })),
  status: StringEnum(WEBHOOK_DELIVERY_STATUSES, {
    description: 'pending: waiting for its next attempt; delivered: answered 2xx; failed: given up',
  }),
  attempts: Type.Integer(),
  status_code: Nullable(Type.Integer({ description: 'what the last attempt was answered' })),
  error: Nullable(Type.String({ description: 'why the last attempt failed' })),
  created_at: Timestamp,
  last_attempt_at: Nullable(Timestamp),
  next_attempt_at: Nullable(Timestamp),
  request: Nullable(
    Type.Object(
      {
        headers: Type.Record(Type.String(), Type.String()),
        body: Type.String({ description: 'the payload, as every attempt sends it' }),
      },
      { description: 'what the last attempt sent; null before the first' },
    ),
  ),
  response: Nullable(
    Type.Object(
      {
        status_code: Type.Integer(),
        headers: Type.Record(Type.String(), Type.String()),
        body: Type.String({ description: 'the start of the answer (4 KiB at most), as text' }),
      },
      { description: 'what the receiver answered the last attempt; null when nothing was' },
    ),
  ),
  duration_ms: Nullable(Type.Integer({ description: 'how long the last attempt took' })),
  redelivery_of: Nullable(
    Type.String({ description: 'the delivery this one sends again; null for an event’s own' }),
  ),
});
export type WebhookDelivery = Static<typeof WebhookDelivery>;

export const WebhookDeliveryList = Type.Array(WebhookDelivery, { description: 'newest first' });

/** What a delivery POSTs (docs/webhooks.md, "The payload"). */
export interface WebhookPayload {
  id: string;
  kind: WebhookDeliveryKind;
  at: string;
  agent: string | null;
  entry: Record<string, unknown>;
  webhook_id: string;
}
