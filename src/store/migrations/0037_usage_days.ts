import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Usage by day (docs/console.md, "Usage"): `usage_days` counts a user's messages and bytes
 * transferred per calendar day (UTC, `YYYY-MM-DD`) beside the monthly `usage_periods`, which
 * the quotas are checked against. Counting starts with this migration: the days before it
 * have no row. Made only when missing: the tests of older migrations write their data with
 * today's repositories, which count days, and make the table ahead of its turn.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('usage_days')
    .ifNotExists()
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('num_messages', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('bytes_transferred', 'bigint', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('usage_days_pk', ['user_id', 'day'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('usage_days').execute();
}
