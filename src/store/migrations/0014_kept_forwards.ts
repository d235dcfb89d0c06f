import { sql, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Messages the proxy could not forward are kept in the target's mailbox and forwarded again
 * (docs/mailbox.md, "Kept forwards"). `next_forward_at` is when the next forward of a kept
 * message is due (null: never, as for every message submitted to the mailbox); a process that
 * claims the message moves it to the end of its lease in the claiming statement, so no other
 * process forwards it meanwhile. `forward_attempts` counts the failed forwards, for the
 * backoff; more than none marks the message as kept. An owner turns keeping off per agent
 * with `keep_failed_forwards` (0/1), on unless they do.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .alterTable('agents')
    .addColumn('keep_failed_forwards', 'integer', (c) => c.notNull().defaultTo(1))
    .execute();
  await db.schema.alterTable('messages').addColumn('next_forward_at', 'bigint').execute();
  await db.schema
    .alterTable('messages')
    .addColumn('forward_attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  // Only kept messages are indexed: the forwarder's look for due ones reads nothing else.
  await db.schema
    .createIndex('messages_next_forward_at')
    .on('messages')
    .column('next_forward_at')
    .where(sql.ref('next_forward_at'), 'is not', null)
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('messages_next_forward_at').execute();
  await db.schema.alterTable('messages').dropColumn('forward_attempts').execute();
  await db.schema.alterTable('messages').dropColumn('next_forward_at').execute();
  await db.schema.alterTable('agents').dropColumn('keep_failed_forwards').execute();
}
