import pg from 'pg';
import { redactUrl } from '../../src/config/index.js';
import type { DialectName } from '../../src/store/index.js';
import { postgresConnection } from '../../src/store/database.js';
import { createScratchDatabase, runOnPostgres } from '../../test/kit/databases.js';

/** The PostgreSQL server to measure on when it answers. */
export const benchPgUrl =
  process.env.AGENTRY_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** Why PostgreSQL cannot be used, or undefined when it answers. */
export async function postgresUnavailable(url: string): Promise<string | undefined> {
  const client = new pg.Client({ ...postgresConnection(url), connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('select 1');
    return undefined;
  } catch (err) {
    return (err as Error).message || String(err);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * The stores to measure on: SQLite always, PostgreSQL when it answers; `skipped` says why
 * PostgreSQL is left out, in words to print.
 */
export async function benchStores(): Promise<{ dialects: DialectName[]; skipped?: string }> {
  const problem = await postgresUnavailable(benchPgUrl);
  if (problem === undefined) return { dialects: ['sqlite', 'postgres'] };
  return {
    dialects: ['sqlite'],
    skipped: `PostgreSQL: ${redactUrl(benchPgUrl)} did not answer (${problem}); set AGENTRY_BENCH_PG_URL to a reachable server to measure it too.`,
  };
}

export interface BenchDatabase {
  dialect: DialectName;
  /** A URL `agentry serve --database-url` accepts. */
  url: string;
  drop(): Promise<void>;
}

/**
 * An empty database: a SQLite file in a new temporary directory, or a new schema on the
 * PostgreSQL server (selected through `search_path`), both removed by `drop`.
 */
export async function freshDatabase(dialect: DialectName): Promise<BenchDatabase> {
  const database = await createScratchDatabase(dialect, { pgUrl: benchPgUrl, prefix: 'bench' });
  if (dialect === 'postgres') {
    // What the scenario before left dirty would otherwise be written out during this one.
    // CHECKPOINT needs a superuser (or pg_checkpoint); without one the run goes on regardless.
    await runOnPostgres(benchPgUrl, 'checkpoint').catch(() => undefined);
  }
  return { dialect, ...database };
}
