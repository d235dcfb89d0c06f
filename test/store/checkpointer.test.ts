import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { sqlitePath } from '../../src/store/database.js';
import { Store } from '../../src/store/index.js';
import { createTestDatabase } from '../kit/databases.js';

/**
 * One commit of a few hundred pages of 4 KiB: below the 1,000 after which a commit
 * checkpoints by itself.
 */
async function writeSomePages(store: Store): Promise<void> {
  await store.transaction(async (tx) => {
    for (let i = 0; i < 300; i++) {
      await tx.users.insert({ id: `user-${i}`, name: `${'x'.repeat(2000)}${i}`, created_at: 0 });
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
    const database = await createTestDatabase('sqlite');
    const errors: unknown[] = [];
    const store = Store.open(database.url, {
      backgroundCheckpoints: { onError: (error) => errors.push(error) },
    });
    try {
      const path = sqlitePath(database.url);
      const base = await migrated(store, path);
      await writeSomePages(store);
      const grown = await growthAfter(path, base, 600_000, 5_000);
      assert.ok(grown >= 600_000, `the database file grew by ${grown} bytes`);
    } finally {
      await store.close();
      await database.drop();
    }
    assert.deepEqual(errors, []);
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
