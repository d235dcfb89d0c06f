/**
 * What a webhook may be told of (docs/webhooks.md, "What fires when"). In a module of its own,
 * with no imports, so that the web pages offer the same kinds without bundling the schema
 * library.
 */
export const WEBHOOK_KINDS = [
  'message.refused',
  'message.expired',
  'message.forward_failed',
  'forwards.back',
  'agent.silent',
  'agent.back',
  'agent.unreachable',
  'agent.failing',
  'agent.unhealthy',
  'agent.recovered',
  'event.error',
] as const;
export type WebhookKind = (typeof WEBHOOK_KINDS)[number];
