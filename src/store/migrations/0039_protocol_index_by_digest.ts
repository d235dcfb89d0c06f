import type { Kysely } from 'kysely';
import { dialectOf } from '../dialect.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * On SQLite, the protocol index (`almanac_protocols`, ordered by agent since 0038) is read by
 * digest again: a search for the agents declaring a protocol (uAgents' broadcast) starts from
 * the digest's entries, where it looked up every registration in turn (tens of milliseconds
 * at ten thousand agents, and growing with them). PostgreSQL's table is keyed by digest
 * already.
 */
export async function up(db: AnyDb): Promise<void> {
  if (dialectOf(db).name !== 'sqlite') return;
  await db.schema
    .createIndex('almanac_protocols_digest')
    .on('almanac_protocols')
    .column('digest')
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  if (dialectOf(db).name !== 'sqlite') return;
  await db.schema.dropIndex('almanac_protocols_digest').execute();
}
