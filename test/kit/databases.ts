import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { postgresConnection } from '../../src/store/database.js';
import type { DialectName } from '../../src/store/index.js';

/** The PostgreSQL server the store tests use; unset means those tests are skipped. */
export const testPgUrl = process.env.AGENTRY_TEST_PG_URL;

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/** Runs one statement on a connection of its own to `url`. */
export async function runOnPostgres(url: string, statement: string): Promise<void> {
  const client = new pg.Client(postgresConnection(url));
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/**
 * An empty database: a SQLite file in a new temporary directory, or a new schema (named
 * `<prefix>_<random>`) on the PostgreSQL server at `pgUrl`, selected through `search_path`;
 * `drop` removes either.
 */
export async function createScratchDatabase(
  dialect: DialectName,
  { pgUrl, prefix }: { pgUrl: string | undefined; prefix: string },
): Promise<TestDatabase> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), `agentry-${prefix}-`));
    return {
      url: `sqlite:${join(dir, 'agentry.db')}`,
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  if (!pgUrl) throw new Error('no PostgreSQL URL to create a schema on');
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  await runOnPostgres(pgUrl, `create schema ${schema}`);
  const url = new URL(pgUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    url: url.toString(),
    drop: () => runOnPostgres(pgUrl, `drop schema ${schema} cascade`),
  };
}

/**
 * A fresh, empty database for a test: a SQLite file, or a new schema on the PostgreSQL test
 * server (`AGENTRY_TEST_PG_URL`), dropped afterwards.
 */
export async function createTestDatabase(dialect: DialectName): Promise<TestDatabase> {
  if (dialect === 'postgres' && !testPgUrl) throw new Error('AGENTRY_TEST_PG_URL is not set');
  return createScratchDatabase(dialect, { pgUrl: testPgUrl, prefix: 'test' });
}
