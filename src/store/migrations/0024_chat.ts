import type { Kysely } from 'kysely';
import { dialectOf } from '../dialect.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Chat (docs/chat.md). `chat_identities` holds the identity each user or team chats from: an
 * agent key Agentry holds (sealed with the server's sealing key, as hosted agents' seeds are)
 * and its address. `chat_sessions` holds each conversation with an agent; `chat_entries` what
 * was said and what became of it, both ways, in the order Agentry saw it (messages,
 * acknowledgements, failures). Everything about a session goes with it, and sessions go with
 * their owner.
 */
export async function up(db: AnyDb): Promise<void> {
  const dialect = dialectOf(db);
  await db.schema
    .createTable('chat_identities')
    .addColumn('owner_id', 'text', (c) => c.primaryKey().references('users.id').onDelete('cascade'))
    .addColumn('address', 'text', (c) => c.notNull().unique())
    .addColumn('key_ciphertext', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('chat_sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('identity', 'text', (c) => c.notNull())
    .addColumn('agent', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('ended_at', 'bigint')
    .execute();
  await db.schema
    .createIndex('chat_sessions_owner')
    .on('chat_sessions')
    .columns(['owner_id', 'updated_at'])
    .execute();
  await dialect
    .addIdentityColumn(db.schema.createTable('chat_entries'), 'id')
    .addColumn('session_id', 'text', (c) =>
      c.notNull().references('chat_sessions.id').onDelete('cascade'),
    )
    .addColumn('at', 'bigint', (c) => c.notNull())
    .addColumn('direction', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('msg_id', 'text')
    .addColumn('content', 'text')
    .addColumn('detail', 'text')
    .execute();
  await db.schema
    .createIndex('chat_entries_session')
    .on('chat_entries')
    .columns(['session_id', 'id'])
    .execute();
  await db.schema
    .createIndex('chat_entries_message')
    .on('chat_entries')
    .columns(['session_id', 'msg_id'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('chat_entries').execute();
  await db.schema.dropTable('chat_sessions').execute();
  await db.schema.dropTable('chat_identities').execute();
}
