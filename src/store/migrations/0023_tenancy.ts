import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Credentials that end when what allowed them ends (docs/keys.md). `api_keys.made_by` names the
 * member who made a team's key while acting for it: the key works only while they are a
 * member. Storage delegations now need the agent's proof or its registration, and end with the
 * registration: the delegations made before, which nothing proved, are withdrawn (their owners
 * delegate again, with proof).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('api_keys').addColumn('made_by', 'text').execute();
  await db.deleteFrom('storage_delegations').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('api_keys').dropColumn('made_by').execute();
}
