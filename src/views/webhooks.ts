import type { WebhookDeliveryInfo, WebhookInfo } from '../services/webhooks.js';
import { isoTimestamp } from '../wire/common.js';
import type { NewWebhook, Webhook, WebhookDelivery } from '../wire/webhooks.js';

const isoOrNull = (ms: number | null): string | null => (ms === null ? null : isoTimestamp(ms));

/** A hook as its owner sees it: never its secret. */
export function webhookView(hook: WebhookInfo): Webhook {
  return {
    id: hook.id,
    url: hook.url,
    kinds: hook.kinds,
    agents: hook.agents,
    description: hook.description,
    created_at: isoTimestamp(hook.createdAt),
    updated_at: isoTimestamp(hook.updatedAt),
  };
}

/** A hook just made, with its secret: the one time it is shown. */
export function newWebhookView(hook: WebhookInfo & { secret: string }): NewWebhook {
  return { ...webhookView(hook), secret: hook.secret };
}

export function webhookDeliveryView(delivery: WebhookDeliveryInfo): WebhookDelivery {
  return {
    id: delivery.id,
    kind: delivery.kind,
    agent: delivery.agent,
    status: delivery.status,
    attempts: delivery.attempts,
    status_code: delivery.statusCode,
    error: delivery.error,
    created_at: isoTimestamp(delivery.createdAt),
    last_attempt_at: isoOrNull(delivery.lastAttemptAt),
    next_attempt_at: isoOrNull(delivery.nextAttemptAt),
    request: delivery.request,
    response:
      delivery.response === null
        ? null
        : {
            status_code: delivery.response.statusCode,
            headers: delivery.response.headers,
            body: delivery.response.body,
          },
    duration_ms: delivery.durationMs,
    redelivery_of: delivery.redeliveryOf,
  };
}
