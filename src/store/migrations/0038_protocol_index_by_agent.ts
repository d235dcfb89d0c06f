import { sql, type Kysely } from 'kysely';
import { dialectOf } from '../dialect.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * On SQLite, the protocol index (`almanac_protocols`) becomes one b-tree ordered by agent: a
 * WITHOUT ROWID table whose primary key is (address, digest). It was three (the rows, the key
 * by digest, an index by address), each written at a random place for a new agent, which cost
 * a registration more than its own row. Every statement that reads it names the agent: search
 * probes it per registration (SQLite's plan was already that: scan the registrations, look each
 * one up), rewriting an agent's protocols deletes by address, and so does the cascade from its
 * registration. PostgreSQL keeps the table as it is: its planner starts protocol search from
 * the digest.
 */
export async function up(db: AnyDb): Promise<void> {
  if (dialectOf(db).name !== 'sqlite') return;
  await db.schema
    .createTable('almanac_protocols_by_agent')
    .addColumn('address', 'text', (c) =>
      c.notNull().references('almanac_registrations.address').onDelete('cascade'),
    )
    .addColumn('digest', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('almanac_protocols_pk', ['address', 'digest'])
    .modifyEnd(sql`without rowid`)
    .execute();
  await sql`insert into almanac_protocols_by_agent (address, digest)
    select address, digest from almanac_protocols`.execute(db);
  await db.schema.dropTable('almanac_protocols').execute();
  await db.schema.alterTable('almanac_protocols_by_agent').renameTo('almanac_protocols').execute();
}

export async function down(db: AnyDb): Promise<void> {
  if (dialectOf(db).name !== 'sqlite') return;
  await db.schema
    .createTable('almanac_protocols_by_digest')
    .addColumn('digest', 'text', (c) => c.notNull())
    .addColumn('address', 'text', (c) =>
      c.notNull().references('almanac_registrations.address').onDelete('cascade'),
    )
    .addPrimaryKeyConstraint('almanac_protocols_pk', ['digest', 'address'])
    .execute();
  await sql`insert into almanac_protocols_by_digest (digest, address)
    select digest, address from almanac_protocols`.execute(db);
  await db.schema.dropTable('almanac_protocols').execute();
  await db.schema.alterTable('almanac_protocols_by_digest').renameTo('almanac_protocols').execute();
  await db.schema
    .createIndex('almanac_protocols_address')
    .on('almanac_protocols')
    .column('address')
    .execute();
}
