import type { Kysely } from 'kysely';
import { dialectOf } from '../dialect.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Storage assets (docs/storage.md). `storage_assets` holds each asset's metadata: its owner
 * (the user its bytes count for), the agent that uploaded it if an agent did, its size,
 * checksum and expiry, and `file`, the name of the file that holds its contents when they
 * are kept in a directory. `storage_asset_contents` holds the contents themselves when they
 * are kept in the database, one row per asset apart from the metadata, so that listing and
 * checking assets never reads their bytes. `storage_asset_permissions` holds the agents an
 * asset is shared with. `storage_delegations` lets an agent registered to no one create assets
 * that count for the user who delegated it (one user per agent). The indexes serve an owner's
 * list, the sweep of expired assets and a user's list of delegations.
 */
export async function up(db: AnyDb): Promise<void> {
  const blob = dialectOf(db).name === 'postgres' ? 'bytea' : 'blob';
  await db.schema
    .createTable('storage_assets')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('agent_address', 'text')
    .addColumn('name', 'text')
    .addColumn('mime_type', 'text')
    .addColumn('size', 'bigint', (c) => c.notNull())
    .addColumn('checksum', 'text', (c) => c.notNull())
    .addColumn('uploaded_at', 'bigint')
    .addColumn('file', 'text')
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('storage_assets_user')
    .on('storage_assets')
    .columns(['user_id', 'created_at'])
    .execute();
  await db.schema
    .createIndex('storage_assets_expires')
    .on('storage_assets')
    .column('expires_at')
    .execute();
  await db.schema
    .createTable('storage_asset_contents')
    .addColumn('asset_id', 'text', (c) =>
      c.primaryKey().references('storage_assets.id').onDelete('cascade'),
    )
    .addColumn('contents', blob, (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('storage_asset_permissions')
    .addColumn('asset_id', 'text', (c) =>
      c.notNull().references('storage_assets.id').onDelete('cascade'),
    )
    .addColumn('agent_address', 'text', (c) => c.notNull())
    .addColumn('can_read', 'integer', (c) => c.notNull())
    .addColumn('can_write', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('storage_asset_permissions_pk', ['asset_id', 'agent_address'])
    .execute();
  await db.schema
    .createTable('storage_delegations')
    .addColumn('agent_address', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('storage_delegations_user')
    .on('storage_delegations')
    .columns(['user_id', 'created_at'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('storage_delegations').execute();
  await db.schema.dropTable('storage_asset_permissions').execute();
  await db.schema.dropTable('storage_asset_contents').execute();
  await db.schema.dropTable('storage_assets').execute();
}
