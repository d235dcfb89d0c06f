import { PostgresAdapter, sql, type CreateTableBuilder, type Kysely } from 'kysely';
import type { Database } from './schema.js';

export type DialectName = 'sqlite' | 'postgres';

/**
 * What the database itself does differently on SQLite and PostgreSQL (locks, migration
 * bookkeeping, column types), both implementations side by side. The differences of one
 * resource's statements live with that resource: the mailbox's group insert in its repository,
 * full-text search in search.ts.
 */
export interface Dialect {
  readonly name: DialectName;
  /**
   * Inside a transaction, makes other transactions that lock the same user wait until this
   * one ends, so a rule over everything a user owns (a quota) sees no concurrent change.
   */
  lockUser(db: Kysely<Database>, userId: string): Promise<void>;
  /** The schema Kysely keeps its migration bookkeeping in, where the dialect has schemas. */
  migrationSchema(db: Kysely<Database>): Promise<string | undefined>;
  /** Adds an integer primary key the database assigns in ascending order. */
  addIdentityColumn<TB extends string, C extends string, CN extends string>(
    table: CreateTableBuilder<TB, C>,
    name: CN,
  ): CreateTableBuilder<TB, C | CN>;
}

const sqliteDialect: Dialect = {
  name: 'sqlite',

  // SQLite's transactions take the database's write lock when they begin (see database.ts):
  // two of them never overlap, whoever they concern.
  lockUser: async () => {},

  migrationSchema: async () => undefined,

  // `integer primary key` is the rowid itself, assigned in ascending order.
  addIdentityColumn: (table, name) => table.addColumn(name, 'integer', (c) => c.primaryKey()),
};

const postgresDialect: Dialect = {
  name: 'postgres',

  async lockUser(db, userId) {
    await db.selectFrom('users').select('id').where('id', '=', userId).forUpdate().execute();
  },

  // Without naming it, Kysely looks for its tables in every schema and is misled by another
  // application's.
  async migrationSchema(db) {
    const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
    return rows[0]?.schema;
  },

  addIdentityColumn: (table, name) =>
    table.addColumn(name, 'bigint', (c) => c.primaryKey().generatedByDefaultAsIdentity()),
};

export function dialectNamed(name: DialectName): Dialect {
  return name === 'sqlite' ? sqliteDialect : postgresDialect;
}

/** The dialect of a connection, for code handed a bare Kysely instance (migrations). */
export function dialectOf(db: Kysely<unknown>): Dialect {
  return db.getExecutor().adapter instanceof PostgresAdapter ? postgresDialect : sqliteDialect;
}
