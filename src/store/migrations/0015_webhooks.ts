import type { Kysely } from 'kysely';
import { dialectOf } from '../dialect.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Webhooks (docs/webhooks.md). `webhooks` holds each user's hooks: where to POST, which kinds,
 * which agents (JSON, null for all) and the secret deliveries are signed with (kept as it is:
 * the service signs with it). `webhook_deliveries` is the queue and its record: one row per
 * event and hook, with the payload as it is sent every time, its attempts, and a lease
 * (`claimed_until`) that keeps two processes from sending it at once. The indexes serve the
 * sender's look-up of what is due, a hook's list, the deletion of an agent's rows and the
 * pruning of old ones.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('webhooks')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('kinds', 'text', (c) => c.notNull())
    .addColumn('agents', 'text')
    .addColumn('description', 'text')
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhooks_user').on('webhooks').column('user_id').execute();
  await dialectOf(db)
    .addIdentityColumn(db.schema.createTable('webhook_deliveries'), 'seq')
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('webhook_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('address', 'text')
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('error', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('last_attempt_at', 'bigint')
    .addColumn('next_attempt_at', 'bigint')
    .addColumn('claimed_until', 'bigint')
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_due')
    .on('webhook_deliveries')
    .columns(['status', 'next_attempt_at'])
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_webhook')
    .on('webhook_deliveries')
    .columns(['webhook_id', 'seq'])
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_address')
    .on('webhook_deliveries')
    .columns(['address', 'created_at'])
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_created')
    .on('webhook_deliveries')
    .column('created_at')
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('webhook_deliveries').execute();
  await db.schema.dropTable('webhooks').execute();
}
