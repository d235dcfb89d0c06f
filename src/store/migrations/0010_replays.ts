import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * The uuids of acknowledged (deleted) messages, until the moment the message would have
 * expired. A pending message's uuid is in `messages`; once its agent deletes it, the uuid
 * moves here, so a captured envelope submitted again is recognised and not delivered a
 * second time. The submit path only reads this table; acknowledging writes it.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('replays')
    .addColumn('uuid', 'text', (c) => c.primaryKey())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('replays_expires_at').on('replays').column('expires_at').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('replays').execute();
}
