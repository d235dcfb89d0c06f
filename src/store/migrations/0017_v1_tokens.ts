import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * The v1 mailroom (docs/mailbox.md, "v1 mailroom"). An agent asks for a challenge without any
 * user's key (`v1_challenges`: single use, bound to the address), signs it, and gets a
 * short-lived access token bound to its address (`v1_tokens`). Only the SHA-256 of a token is
 * stored, so that every replica on the database accepts it and a copy of the database grants
 * nothing. The indexes on `expires_at` serve the purge of expired rows.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('v1_tokens')
    .addColumn('token_hash', 'text', (c) => c.primaryKey())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('v1_tokens_expires_at')
    .on('v1_tokens')
    .column('expires_at')
    .execute();
  await db.schema
    .createTable('v1_challenges')
    .addColumn('challenge', 'text', (c) => c.primaryKey())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('v1_challenges_expires_at')
    .on('v1_challenges')
    .column('expires_at')
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('v1_challenges').execute();
  await db.schema.dropTable('v1_tokens').execute();
}
