import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { after } from 'node:test';
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
 * What names the databases of one `npm test` run (`test/run.ts` sets it, and drops whatever
 * of the run is left afterwards): `agentry_test_<run>_<random>`.
 */
export const testRunTag = /^[a-z0-9]{1,16}$/.test(process.env.AGENTRY_TEST_RUN ?? '')
  ? process.env.AGENTRY_TEST_RUN!
  : 'solo';

/** The prefix of the names of the databases of the run tagged `run`. */
export const runDatabasePrefix = (run: string): string => `agentry_test_${run}_`;

/** Whether this process runs a test file (and not, say, the benchmark, which imports the kit). */
const inTestFile = /\.test\.[cm]?[jt]s$/.test(process.argv[1] ?? '');

let fileDatabase: Promise<string> | undefined;

/**
 * The URL of a database of this test file's own on the PostgreSQL test server, created on
 * first use and dropped once the file's tests are done. Files run at once: in a database of
 * their own, no file's migrations wait on another's (Kysely's migration lock is one per
 * database) or look at another's tables while they are dropped, and a file that ends while
 * a server of it still holds connections drops what it made all the same.
 */
function fileDatabaseUrl(pgUrl: string): Promise<string> {
  fileDatabase ??= (async () => {
    const name = `${runDatabasePrefix(testRunTag)}${randomBytes(6).toString('hex')}`;
    await runOnPostgres(pgUrl, `create database ${name}`);
    const url = new URL(pgUrl);
    url.pathname = `/${name}`;
    return url.toString();
  })();
  return fileDatabase;
}

if (testPgUrl && inTestFile) {
  // A hook of the file's root: it runs after every test of the file.
  after(async () => {
    const url = await fileDatabase?.catch(() => undefined);
    if (!url) return;
    const name = new URL(url).pathname.slice(1);
    await runOnPostgres(testPgUrl, `drop database if exists ${name} with (force)`);
  });
}

/**
 * A fresh, empty database for a test: a SQLite file, or a new schema on the PostgreSQL test
 * server (`AGENTRY_TEST_PG_URL`), dropped afterwards. In a test file the schema is made in the
 * file's own database (see {@link fileDatabaseUrl}); elsewhere in the database the URL names.
 */
export async function createTestDatabase(dialect: DialectName): Promise<TestDatabase> {
  if (dialect === 'postgres' && !testPgUrl) throw new Error('AGENTRY_TEST_PG_URL is not set');
  const pgUrl =
    dialect === 'postgres' && testPgUrl && inTestFile
      ? await fileDatabaseUrl(testPgUrl)
      : testPgUrl;
  return createScratchDatabase(dialect, { pgUrl, prefix: 'test' });
}
