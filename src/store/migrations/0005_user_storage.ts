import { sql, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Bytes held in all of a user's mailboxes, kept as one number per user. Every submission
 * checks the storage quota against it; summing the user's mailboxes instead costs a read of
 * every one of them per group of submissions, which grows with the number of agents. It moves
 * in the same transaction as the mailbox counters it totals.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('user_storage')
    .addColumn('user_id', 'text', (c) => c.primaryKey().references('users.id').onDelete('cascade'))
    .addColumn('bytes_stored', 'bigint', (c) => c.notNull())
    .execute();
  await sql`
    insert into user_storage (user_id, bytes_stored)
    select user_id, sum(bytes_stored) from mailboxes group by user_id
  `.execute(db);
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('user_storage').execute();
}
