import { Migrator, type Kysely, type MigrationResultSet } from 'kysely';
import { migrations } from './migrations/index.js';

export interface MigrationOutcome {
  applied: string[];
}

/**
 * Brings the schema up to date. Safe to run from several replicas at once (Kysely locks).
 * On PostgreSQL the bookkeeping tables live in the connection's current schema: without
 * naming it, Kysely looks for them in every schema and is misled by another application's.
 */
export async function migrateToLatest(
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  db: Kysely<any>,
  migrationTableSchema?: string,
): Promise<MigrationOutcome> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    ...(migrationTableSchema ? { migrationTableSchema } : {}),
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
