import type { Kysely } from 'kysely';
import { dialectOf } from '../dialect.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Mailbox messages and recorded agent interactions.
 *
 * Messages are written on the hottest path of the service, so the table carries as few
 * b-trees as its reads need (every one costs a page write per commit):
 * - a time-ordered integer key (appends at the right edge instead of random page splits);
 * - `uuid`, unique: derived from the envelope's digest, it serves lookups by uuid and makes
 *   resubmitting the same envelope a no-op, so no second key is needed for idempotency;
 * - (address, id): a mailbox's messages oldest first, and the cascade from `mailboxes`;
 * - expires_at: the retention sweep deletes what has expired without scanning the table;
 *   the abandoned mailboxes it exists for are exactly the ones that grow large. It costs
 *   about one more page per commit (measured ~15 % more WAL per row on SQLite).
 */
export async function up(db: AnyDb): Promise<void> {
  const dialect = dialectOf(db);

  await dialect
    .addIdentityColumn(db.schema.createTable('messages'), 'id')
    .addColumn('uuid', 'text', (c) => c.notNull().unique())
    .addColumn('address', 'text', (c) =>
      c.notNull().references('mailboxes.address').onDelete('cascade'),
    )
    .addColumn('envelope', 'text', (c) => c.notNull())
    .addColumn('size', 'bigint', (c) => c.notNull())
    .addColumn('received_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('messages_address_id')
    .on('messages')
    .columns(['address', 'id'])
    .execute();
  await db.schema.createIndex('messages_expires_at').on('messages').column('expires_at').execute();

  await dialect
    .addIdentityColumn(db.schema.createTable('interactions'), 'id')
    .addColumn('source', 'text', (c) =>
      c.notNull().references('agents.address').onDelete('cascade'),
    )
    .addColumn('target', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('interactions_source_id')
    .on('interactions')
    .columns(['source', 'id'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('interactions').execute();
  await db.schema.dropTable('messages').execute();
}
