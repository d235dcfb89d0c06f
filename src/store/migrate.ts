import { Migrator, PostgresAdapter, sql, type Kysely, type MigrationResultSet } from 'kysely';
import { migrations } from './migrations/index.js';

export interface MigrationOutcome {
  applied: string[];
}

/** Brings the schema up to date. Safe to run from several replicas at once (Kysely locks). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function migrateToLatest(db: Kysely<any>): Promise<MigrationOutcome> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    // Without a schema, Kysely takes a migration table in ANY schema of the database for its
    // own and then fails to use it: name ours, so that several instances (or test runs) can
    // share one PostgreSQL database in schemas of their own.
    ...(db.getExecutor().adapter instanceof PostgresAdapter
      ? { migrationTableSchema: await currentSchema(db) }
      : {}),
  });
  const result: MigrationResultSet = await migrator.migrateToLatest();
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error');
    const reason = result.error instanceof Error ? result.error.message : String(result.error);
    throw new Error(`Migration ${failed?.migrationName ?? '(unknown)'} failed: ${reason}`, {
      cause: result.error,
    });
  }
  return {
    applied: (result.results ?? [])
      .filter((r) => r.status === 'Success')
      .map((r) => r.migrationName),
  };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function currentSchema(db: Kysely<any>): Promise<string> {
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  const schema = rows[0]?.schema;
  if (!schema) throw new Error('PostgreSQL has no current schema: check search_path');
  return schema;
}
