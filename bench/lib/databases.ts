import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { DialectName } from '../../src/store/index.js';

/** The PostgreSQL server to measure on when it answers. */
export const benchPgUrl =
  process.env.AGENTRY_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export function pgClientConfig(url: string): pg.ClientConfig {
  // Without an explicit user, pg falls back to $USER, which is unset in many containers.
  return { connectionString: url, user: new URL(url).username || 'postgres' };
}

/** Why PostgreSQL cannot be used, or undefined when it answers. */
export async function postgresUnavailable(url: string): Promise<string | undefined> {
  const client = new pg.Client({ ...pgClientConfig(url), connectionTimeoutMillis: 3000 });
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
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'agentry-bench-'));
    return {
      dialect,
      url: `sqlite:${join(dir, 'agentry.db')}`,
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const schema = `bench_${randomBytes(6).toString('hex')}`;
  const admin = async (statement: string): Promise<void> => {
    const client = new pg.Client(pgClientConfig(benchPgUrl));
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await admin(`create schema ${schema}`);
  // What the scenario before left dirty would otherwise be written out during this one.
  // CHECKPOINT needs a superuser (or pg_checkpoint); without one the run goes on regardless.
  await admin('checkpoint').catch(() => undefined);
  const url = new URL(benchPgUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return { dialect, url: url.toString(), drop: () => admin(`drop schema ${schema} cascade`) };
}
