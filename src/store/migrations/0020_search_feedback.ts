import type { Kysely } from 'kysely';
import { dialectOf } from '../dialect.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Search feedback (docs/almanac.md, "Search API"). `search_pages` keeps one row per answer of
 * the Search API: its `search_id` (several pages may share one, when a client passes it
 * again), what was asked (the request as JSON), the addresses answered in order, and when the
 * row expires. `search_clicks` records which agent of which search a client selected
 * (`POST /v1/search/agents/click`). Both are pruned once the search expires; the indexes serve
 * the look-up by search id and the pruning.
 */
export async function up(db: AnyDb): Promise<void> {
  await dialectOf(db)
    .addIdentityColumn(db.schema.createTable('search_pages'), 'seq')
    .addColumn('search_id', 'text', (c) => c.notNull())
    .addColumn('request', 'text', (c) => c.notNull())
    .addColumn('addresses', 'text', (c) => c.notNull())
    .addColumn('page_offset', 'integer', (c) => c.notNull())
    .addColumn('total', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('search_pages_search')
    .on('search_pages')
    .columns(['search_id', 'expires_at'])
    .execute();
  await db.schema
    .createIndex('search_pages_expires')
    .on('search_pages')
    .column('expires_at')
    .execute();
  await dialectOf(db)
    .addIdentityColumn(db.schema.createTable('search_clicks'), 'seq')
    .addColumn('search_id', 'text', (c) => c.notNull())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('contract', 'text', (c) => c.notNull())
    .addColumn('page_index', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('search_clicks_search')
    .on('search_clicks')
    .column('search_id')
    .execute();
  await db.schema
    .createIndex('search_clicks_expires')
    .on('search_clicks')
    .column('expires_at')
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('search_clicks').execute();
  await db.schema.dropTable('search_pages').execute();
}
