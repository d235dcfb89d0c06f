import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { NewStorageAssetRow } from '../../src/store/repositories/storage-assets.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { insertUser, openTestStore, type TestStore } from '../kit/store.js';

describeOnEachDialect('storage assets store', (dialect) => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore(dialect);
  });
  after(() => t.close());

  const asset = (userId: string, fields: Partial<NewStorageAssetRow> = {}): NewStorageAssetRow => ({
    id: randomUUID(),
    user_id: userId,
    agent_address: null,
    name: null,
    mime_type: 'application/octet-stream',
    size: 0,
    checksum: '',
    uploaded_at: null,
    file: null,
    expires_at: 10_000,
    created_at: 0,
    updated_at: 0,
    ...fields,
  });

  it('keeps the bytes apart from the metadata, and gives back exactly what was stored', async () => {
    const userId = await insertUser(t.store);
    const bytes = randomBytes(4096);
    const row = asset(userId, { size: bytes.length, uploaded_at: 0 });
    await t.store.repos.storageAssets.insert(row, bytes);
    const found = await t.store.repos.storageAssets.find(row.id);
    assert.equal(found?.size, bytes.length);
    assert.ok((await t.store.repos.storageAssets.contents(row.id))?.equals(bytes));
    const replaced = Buffer.from([0, 1, 2, 255]);
    await t.store.repos.storageAssets.replaceContents(
      row.id,
      { mime_type: 'image/png', size: 4, checksum: 'x', uploaded_at: 1, updated_at: 1, file: null },
      replaced,
    );
    assert.ok((await t.store.repos.storageAssets.contents(row.id))?.equals(replaced));
  });

  it('adds to a stored total only within the limit, in one statement, even when raced', async () => {
    const userId = await insertUser(t.store);
    const repo = t.store.repos.storageAssets;
    const attempts = await Promise.all(
      Array.from({ length: 10 }, () =>
        t.store.transaction((tx) => tx.storageAssets.addStored(userId, 300, 1000)),
      ),
    );
    assert.equal(attempts.filter(Boolean).length, 3);
    assert.equal(await repo.stored(userId), 900);
    assert.equal(await repo.addStored(userId, -400, 1000), true);
    assert.equal(await repo.stored(userId), 500);
  });

  it('sweeps expired assets with their contents and permissions, and says what went', async () => {
    const userId = await insertUser(t.store);
    const repo = t.store.repos.storageAssets;
    const expired = asset(userId, { size: 3, expires_at: 500 });
    const alive = asset(userId, { size: 5, expires_at: 5_000 });
    await repo.insert(expired, Buffer.from('abc'));
    await repo.insert(alive, Buffer.from('abcde'));
    await repo.setPermission({
      asset_id: expired.id,
      agent_address: 'agent1someone',
      can_read: 1,
      can_write: 0,
      created_at: 0,
    });
    await repo.addStored(userId, 8, 1000);
    const removed = await t.store.transaction(async (tx) => {
      const gone = await tx.storageAssets.removeExpired(1000, 100);
      await tx.storageAssets.releaseStored(gone);
      return gone;
    });
    assert.deepEqual(removed, [{ id: expired.id, user_id: userId, size: 3, file: null }]);
    assert.equal(await repo.stored(userId), 5);
    assert.equal(await repo.contents(expired.id), undefined);
    assert.equal(await repo.findPermission(expired.id, 'agent1someone'), undefined);
    assert.ok(await repo.find(alive.id));
  });
});
