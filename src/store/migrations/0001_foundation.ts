import type { Kysely } from 'kysely';

// Migrations use Kysely<any>: they describe the schema as it was then, not the current types.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('users')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('secret_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint')
    .addColumn('revoked_at', 'bigint')
    .execute();
  await db.schema.createIndex('api_keys_user_id').on('api_keys').column('user_id').execute();

  await db.schema
    .createTable('challenges')
    .addColumn('challenge', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('challenges_expires_at')
    .on('challenges')
    .column('expires_at')
    .execute();

  await db.schema
    .createTable('identities')
    .addColumn('address', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('proven_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('identities_user_id').on('identities').column('user_id').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('identities').execute();
  await db.schema.dropTable('challenges').execute();
  await db.schema.dropTable('api_keys').execute();
  await db.schema.dropTable('users').execute();
}
