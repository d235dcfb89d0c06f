import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * The Almanac: where agents register their endpoints and find each other. Registrations,
 * status updates and protocol manifests arrive independently of one another, so each has
 * its own table (and registrations and statuses their own replay watermark).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('almanac_registrations')
    .addColumn('address', 'text', (c) => c.primaryKey())
    // 'agent' or 'test-agent'; null when the identifier named no network.
    .addColumn('prefix', 'text')
    .addColumn('endpoints', 'text', (c) => c.notNull())
    .addColumn('protocols', 'text', (c) => c.notNull())
    .addColumn('metadata', 'text')
    .addColumn('signed_at', 'bigint', (c) => c.notNull())
    .addColumn('signature', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('almanac_registrations_expires_at')
    .on('almanac_registrations')
    .column('expires_at')
    .execute();

  await db.schema
    .createTable('almanac_statuses')
    .addColumn('address', 'text', (c) => c.primaryKey())
    .addColumn('is_active', 'integer', (c) => c.notNull())
    .addColumn('signed_at', 'bigint', (c) => c.notNull())
    .addColumn('signature', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('almanac_manifests')
    .addColumn('digest', 'text', (c) => c.primaryKey())
    .addColumn('manifest', 'text', (c) => c.notNull())
    // 1 when the manifest hashes to its digest; see protocolManifestDigest for when it cannot.
    .addColumn('verified', 'integer', (c) => c.notNull())
    .addColumn('stored_at', 'bigint', (c) => c.notNull())
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('almanac_manifests').execute();
  await db.schema.dropTable('almanac_statuses').execute();
  await db.schema.dropTable('almanac_registrations').execute();
}
