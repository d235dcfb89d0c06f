import type { Kysely } from 'kysely';
import { dialectOf } from '../dialect.js';
import { quarantineUnservable } from '../repositories/mailbox.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * A place aside for messages the agent's client cannot take (docs/mailbox.md, "Quarantine"),
 * and one pass over the stored messages that moves there those that submit admitted before
 * it checked envelopes as the client reads them.
 */
export async function up(db: AnyDb): Promise<void> {
  const dialect = dialectOf(db);
  await dialect
    .addIdentityColumn(db.schema.createTable('quarantined_messages'), 'id')
    .addColumn('uuid', 'text', (c) => c.notNull().unique())
    .addColumn('address', 'text', (c) =>
      c.notNull().references('mailboxes.address').onDelete('cascade'),
    )
    .addColumn('envelope', 'text', (c) => c.notNull())
    .addColumn('size', 'bigint', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('received_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('quarantined_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('quarantined_messages_address_id')
    .on('quarantined_messages')
    .columns(['address', 'id'])
    .execute();
  await db.schema
    .createIndex('quarantined_messages_expires_at')
    .on('quarantined_messages')
    .column('expires_at')
    .execute();
  // Loaded here, not at the top: every process loads the migrations, and this one brings in
  // the envelope validator, which only this pass over old messages needs.
  const { unservableReason } = await import('../../wire/stored-envelope.js');
  await quarantineUnservable(db, unservableReason, Date.now());
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('quarantined_messages').execute();
}
