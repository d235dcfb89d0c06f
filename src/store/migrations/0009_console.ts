import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Web console sign-in: a session is opened with an API key and dies with it (revoked or
 * expired key, or its own expiry). Only the SHA-256 of the session token is stored. API keys
 * gain an optional label so that a list of keys says what each one is for.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('sessions')
    .addColumn('token_hash', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('key_id', 'text', (c) => c.notNull().references('api_keys.id').onDelete('cascade'))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('sessions_expires_at').on('sessions').column('expires_at').execute();
  await db.schema.alterTable('api_keys').addColumn('label', 'text').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('api_keys').dropColumn('label').execute();
  await db.schema.dropTable('sessions').execute();
}
