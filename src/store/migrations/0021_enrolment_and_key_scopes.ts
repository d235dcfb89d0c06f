import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Agent enrolment and scoped API keys. `agent_enrolments` holds each address an owner
 * provisioned (an Agent URI): that agent may register and update itself with its own
 * attestation, under that owner. Only the address is kept, never the seed. `api_keys` gains
 * its scope: `read_only` (1: safe methods only) and `addresses` (a JSON array of the agent
 * addresses the key may act on; null for all).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('agent_enrolments')
    .addColumn('address', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('handle', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('agent_enrolments_user')
    .on('agent_enrolments')
    .columns(['user_id', 'created_at'])
    .execute();
  await db.schema
    .alterTable('api_keys')
    .addColumn('read_only', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('api_keys').addColumn('addresses', 'text').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('api_keys').dropColumn('addresses').execute();
  await db.schema.alterTable('api_keys').dropColumn('read_only').execute();
  await db.schema.dropTable('agent_enrolments').execute();
}
