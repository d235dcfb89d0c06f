import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * When the delivery trace last recorded a message as handed to its agent (null: never).
 * A poll that hands out the same pending messages again writes no trace row for them until
 * a minute has passed (docs/mailbox.md, "Delivery trace"), so polling costs no write.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('messages').addColumn('polled_at', 'bigint').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('messages').dropColumn('polled_at').execute();
}
