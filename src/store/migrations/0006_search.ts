import type { Kysely } from 'kysely';
import { dialectOf } from '../dialect.js';
import { fullTextSearch } from '../full-text.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Discovery. `almanac_protocols` holds one row per protocol an Almanac registration declares,
 * so finding the agents of a protocol is an index lookup; it is rewritten with the
 * registration, in the same transaction, and goes with it. The full-text index of the
 * registry (names, handles, descriptions, readmes) is the database's own engine: see
 * FullTextSearch.createAgentSearch. Interactions are counted per target for search rankings.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('almanac_protocols')
    .addColumn('digest', 'text', (c) => c.notNull())
    .addColumn('address', 'text', (c) =>
      c.notNull().references('almanac_registrations.address').onDelete('cascade'),
    )
    .addPrimaryKeyConstraint('almanac_protocols_pk', ['digest', 'address'])
    .execute();
  await db.schema
    .createIndex('almanac_protocols_address')
    .on('almanac_protocols')
    .column('address')
    .execute();
  await db.schema
    .createIndex('almanac_registrations_updated_at')
    .on('almanac_registrations')
    .column('updated_at')
    .execute();
  await db.schema
    .createIndex('interactions_target_created')
    .on('interactions')
    .columns(['target', 'created_at'])
    .execute();

  const registrations = await db
    .selectFrom('almanac_registrations')
    .select(['address', 'protocols'])
    .execute();
  for (const { address, protocols } of registrations as { address: string; protocols: string }[]) {
    const digests = [...new Set(JSON.parse(protocols) as string[])];
    if (digests.length === 0) continue;
    await db
      .insertInto('almanac_protocols')
      .values(digests.map((digest) => ({ digest: normaliseDigest(digest), address })))
      .onConflict((oc) => oc.doNothing())
      .execute();
  }

  const search = fullTextSearch(dialectOf(db).name);
  await search.createAgentSearch(db);
  const agents = await db
    .selectFrom('agents')
    .select(['address', 'name', 'handle', 'profile'])
    .execute();
  type Listing = { address: string; name: string; handle: string | null; profile: string };
  const texts = (agents as Listing[]).map((agent) => {
    const profile = JSON.parse(agent.profile) as { description?: string; readme?: string };
    return {
      address: agent.address,
      name: agent.name,
      handle: agent.handle ?? '',
      description: profile.description ?? '',
      readme: profile.readme ?? '',
    };
  });
  for (let from = 0; from < texts.length; from += 500) {
    await search.indexAgentTexts(db, texts.slice(from, from + 500));
  }
}

/** Digests are stored as `proto:` and hex, however the agent wrote them. */
function normaliseDigest(digest: string): string {
  return digest.startsWith('proto:') ? digest : `proto:${digest}`;
}

export async function down(db: AnyDb): Promise<void> {
  await fullTextSearch(dialectOf(db).name).dropAgentSearch(db);
  await db.schema.dropIndex('interactions_target_created').execute();
  await db.schema.dropIndex('almanac_registrations_updated_at').execute();
  await db.schema.dropTable('almanac_protocols').execute();
}
