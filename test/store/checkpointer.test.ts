import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
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

/** Waits until the database file (not its write-ahead log) holds at least `bytes`. */
async function fileSizeAfter(path: string, bytes: number, withinMs: number): Promise<number> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const size = statSync(path).size;
    if (size >= bytes || Date.now() > deadline) return size;
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
      await store.migrate();
      await writeSomePages(store);
      const size = await fileSizeAfter(sqlitePath(database.url), 600_000, 5_000);
      assert.ok(size >= 600_000, `the database file holds ${size} bytes`);
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
      await store.migrate();
      await writeSomePages(store);
      const size = await fileSizeAfter(sqlitePath(database.url), 600_000, 500);
      assert.ok(size < 600_000, `the database file holds ${size} bytes`);
    } finally {
      await store.close();
      await database.drop();
    }
  });
});
