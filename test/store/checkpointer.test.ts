import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { CheckpointPasses } from '../../src/store/checkpoint-passes.js';
import { sqlitePath } from '../../src/store/database.js';
import { Store } from '../../src/store/index.js';
import { openSqliteConnection } from '../../src/store/sqlite-connection.js';
import { createTestDatabase } from '../kit/databases.js';

/**
 * One commit of a few hundred pages of 4 KiB: below the 1,000 after which a commit
 * checkpoints by itself.
 */
async function writeSomePages(store: Store, prefix = 'user'): Promise<void> {
  await store.transaction(async (tx) => {
    for (let i = 0; i < 300; i++) {
      await tx.users.insert({
        id: `${prefix}-${i}`,
        name: `${prefix}${'x'.repeat(2000)}${i}`,
        created_at: 0,
      });
    }
  });
}

/**
 * Migrates the store and copies what the migrations wrote into the database file, so that the
 * write-ahead log starts empty (the migrations alone make more than a commit's worth of pages);
 * answers the file's size then.
 */
async function migrated(store: Store, path: string): Promise<number> {
  await store.migrate();
  await sql`PRAGMA wal_checkpoint(TRUNCATE)`.execute(store.db);
  return statSync(path).size;
}

/** One commit of a row of about 1.5 KiB, its name as long in its index. */
async function commitRow(store: Store, index: number): Promise<void> {
  await store.repos.users.insert({
    id: `steady-${index}`,
    name: `${'x'.repeat(1500)}${index}`,
    created_at: 0,
  });
}

/**
 * Runs `test` on a store of a new database whose checkpoints a thread of their own runs, as the
 * service's do; fails if that thread reported an error.
 */
async function withBackgroundCheckpoints(
  test: (store: Store, path: string) => Promise<void>,
): Promise<void> {
  const database = await createTestDatabase('sqlite');
  const errors: unknown[] = [];
  const store = Store.open(database.url, {
    backgroundCheckpoints: { onError: (error) => errors.push(error) },
  });
  try {
    await test(store, sqlitePath(database.url));
  } finally {
    await store.close();
    await database.drop();
  }
  assert.deepEqual(errors, []);
}

/** Waits until the database file (not its write-ahead log) has grown by at least `bytes`. */
async function growthAfter(
  path: string,
  from: number,
  bytes: number,
  withinMs: number,
): Promise<number> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const grown = statSync(path).size - from;
    if (grown >= bytes || Date.now() > deadline) return grown;
    await sleep(20);
  }
}

describe('background checkpoints (sqlite)', () => {
  it('copy committed pages into the database file without a commit doing it', async () => {
    await withBackgroundCheckpoints(async (store, path) => {
      const base = await migrated(store, path);
      await writeSomePages(store);
      const grown = await growthAfter(path, base, 600_000, 5_000);
      assert.ok(grown >= 600_000, `the database file grew by ${grown} bytes`);
    });
  });

  it('start the log again under a steady flow of commits, where it grew until the backstop', async () => {
    await withBackgroundCheckpoints(async (store, path) => {
      await migrated(store, path);
      const pages = async () =>
        (await sql<{ page_count: number }>`PRAGMA page_count`.execute(store.db)).rows[0]!
          .page_count;
      const before = await pages();
      // A commit about every millisecond, as a service under load makes them: each writes at
      // least two frames to the log (the row's page and its name's index page).
      for (let commit = 0; commit < 2_000; commit++) {
        await commitRow(store, commit);
        await sleep(1);
      }
      const written = (await pages()) - before;
      assert.ok(written >= 1_000, `the commits wrote ${written} new pages`);
      // The log's file keeps the size it grew to; a frame is a page and a 24-byte header.
      // Started again only by the backstop, it reached 10,000 (here, 1,200 or so).
      const frames = Math.floor(statSync(`${path}-wal`).size / (4096 + 24));
      assert.ok(frames < 4_000, `the log grew to ${frames} frames`);
    });
  });

  it('are what moves the pages: without them the log keeps them', async () => {
    const database = await createTestDatabase('sqlite');
    const store = Store.open(database.url);
    try {
      const path = sqlitePath(database.url);
      const base = await migrated(store, path);
      await writeSomePages(store);
      const grown = await growthAfter(path, base, 600_000, 500);
      assert.ok(grown < 600_000, `the database file grew by ${grown} bytes`);
    } finally {
      await store.close();
      await database.drop();
    }
  });
});

describe('checkpoint passes (sqlite)', () => {
  it('sync the database file after copying what was committed, and not again until more is', async () => {
    const database = await createTestDatabase('sqlite');
    // No thread of its own: the test runs the passes, as the thread does, on a second connection.
    const store = Store.open(database.url);
    const path = sqlitePath(database.url);
    const connection = openSqliteConnection(path);
    /** The database file's size at each sync: the pages the pass copied are in it by then. */
    const syncs: number[] = [];
    const passes = new CheckpointPasses(connection, () => syncs.push(statSync(path).size));
    try {
      const base = await migrated(store, path);
      assert.equal(passes.pass(), true, 'the first pass does not know what was synced before');
      assert.equal(passes.pass(), false, 'nothing committed since');

      await writeSomePages(store);
      assert.equal(passes.pass(), true);
      assert.ok(syncs.at(-1)! - base >= 600_000, `synced at ${syncs.at(-1)! - base} bytes more`);
      assert.equal(passes.pass(), false);

      // That pass copied the whole log, so this commit writes it again from its beginning
      // (the log's counts start again too): still a commit to copy and sync.
      await writeSomePages(store, 'again');
      assert.equal(passes.pass(), true);
      assert.ok(syncs.at(-1)! - base >= 1_200_000, `synced at ${syncs.at(-1)! - base} bytes more`);
      assert.equal(passes.pass(), false);
      assert.equal(syncs.length, 3);
    } finally {
      connection.close();
      await store.close();
      await database.drop();
    }
  });
});
