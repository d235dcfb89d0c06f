import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Webhook deliveries keep their last exchange (docs/webhooks.md, "Seeing deliveries"): the
 * headers the last attempt sent (the body is the payload, the same every time), and what the
 * receiver answered: its headers and the start of its body (JSON and text), and how long the
 * attempt took. `redelivery_of` names the delivery a redelivery sends again.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('webhook_deliveries').addColumn('request_headers', 'text').execute();
  await db.schema.alterTable('webhook_deliveries').addColumn('response_headers', 'text').execute();
  await db.schema.alterTable('webhook_deliveries').addColumn('response_body', 'text').execute();
  await db.schema.alterTable('webhook_deliveries').addColumn('duration_ms', 'integer').execute();
  await db.schema.alterTable('webhook_deliveries').addColumn('redelivery_of', 'text').execute();
}

export async function down(db: AnyDb): Promise<void> {
  for (const column of [
    'redelivery_of',
    'duration_ms',
    'response_body',
    'response_headers',
    'request_headers',
  ]) {
    await db.schema.alterTable('webhook_deliveries').dropColumn(column).execute();
  }
}
