import type { Kysely } from 'kysely';
import { dialectOf } from '../dialect.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * The delivery trace (docs/mailbox.md, "Delivery trace"): one row per thing that happened to
 * a message for an agent — refused, handed to a poll, deleted, expired, quarantined,
 * forwarded — and the interactions agents report. Rows name the agent whose owner may read
 * them; they are pruned with the retention period of messages. A pending message is its own
 * record of being submitted and stored: it keeps its sender and envelope digest, and the row
 * that records its leaving carries them on, so a submit writes no trace row of its own. The
 * digest of a pending message is not indexed (an index on random keys would cost every submit
 * a good part of its insert); a look-up by digest names the target, whose mailbox is read.
 */
export async function up(db: AnyDb): Promise<void> {
  const dialect = dialectOf(db);
  await db.schema.alterTable('messages').addColumn('sender', 'text').execute();
  await db.schema.alterTable('messages').addColumn('digest', 'text').execute();
  await dialect
    .addIdentityColumn(db.schema.createTable('delivery_events'), 'id')
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('event', 'text', (c) => c.notNull())
    .addColumn('at', 'bigint', (c) => c.notNull())
    .addColumn('uuid', 'text')
    .addColumn('digest', 'text')
    .addColumn('sender', 'text')
    .addColumn('size', 'bigint')
    .addColumn('status_code', 'integer')
    .addColumn('latency_ms', 'integer')
    .addColumn('detail', 'text')
    .execute();
  await db.schema
    .createIndex('delivery_events_address_at')
    .on('delivery_events')
    .columns(['address', 'at'])
    .execute();
  await db.schema
    .createIndex('delivery_events_uuid')
    .on('delivery_events')
    .column('uuid')
    .execute();
  await db.schema
    .createIndex('delivery_events_digest')
    .on('delivery_events')
    .column('digest')
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('delivery_events').execute();
  await db.schema.alterTable('messages').dropColumn('digest').execute();
  await db.schema.alterTable('messages').dropColumn('sender').execute();
}
