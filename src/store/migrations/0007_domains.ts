import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Names: a user owns a domain (such as `alice.agent`) and assigns agents to it with weights.
 * An agent belongs to at most one domain, which its Almanac record names.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('domains')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('domains_user_id')
    .on('domains')
    .columns(['user_id', 'name'])
    .execute();

  await db.schema
    .createTable('domain_agents')
    .addColumn('domain', 'text', (c) => c.notNull().references('domains.name').onDelete('cascade'))
    .addColumn('address', 'text', (c) => c.notNull().unique())
    .addColumn('weight', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('domain_agents_pk', ['domain', 'address'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('domain_agents').execute();
  await db.schema.dropTable('domains').execute();
}
