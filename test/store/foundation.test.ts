import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { sqlitePath } from '../../src/store/database.js';
import { Store } from '../../src/store/index.js';
import { createTestDatabase } from '../kit/databases.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { insertUser, openTestStore, type TestStore } from '../kit/store.js';

describeOnEachDialect('store foundation', (dialect) => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore(dialect);
  });
  after(() => t.close());

  it('reports the dialect it runs on', () => {
    assert.equal(t.store.dialect, dialect);
  });

  it('migrates idempotently', async () => {
    const again = await t.store.migrate();
    assert.deepEqual(again.applied, []);
    assert.equal(await t.store.ping(), true);
  });

  it('finds users by id and name and counts them', async () => {
    const before = await t.store.repos.users.count();
    const id = await insertUser(t.store, 'alice-store');
    assert.equal((await t.store.repos.users.findByName('alice-store'))?.id, id);
    assert.equal((await t.store.repos.users.findById(id))?.name, 'alice-store');
    assert.equal(await t.store.repos.users.count(), before + 1);
  });

  it('keeps times as exact integers', async () => {
    const id = await insertUser(t.store);
    const at = 1_790_000_000_123;
    await t.store.repos.apiKeys.insert({
      id: 'abcdefghijkl',
      user_id: id,
      secret_hash: 'f'.repeat(64),
      created_at: at,
      expires_at: at + 1,
      revoked_at: null,
    });
    const row = await t.store.repos.apiKeys.findById('abcdefghijkl');
    assert.equal(row?.created_at, at);
    assert.equal(row?.expires_at, at + 1);
    assert.equal(await t.store.repos.apiKeys.revoke('abcdefghijkl', at + 2), true);
    assert.equal(await t.store.repos.apiKeys.revoke('abcdefghijkl', at + 3), false);
  });

  it('hands a challenge to exactly one of many concurrent takers', async () => {
    const userId = await insertUser(t.store);
    await t.store.repos.challenges.insert({
      challenge: 'c-race',
      user_id: userId,
      address: 'agent1x',
      expires_at: Date.now() + 60_000,
    });
    const taken = await Promise.all(
      Array.from({ length: 10 }, () =>
        t.store.repos.challenges.takeFor('c-race', userId, 'agent1x'),
      ),
    );
    assert.equal(taken.filter(Boolean).length, 1);
  });

  it('leaves a challenge alone when another user or address asks for it', async () => {
    const owner = await insertUser(t.store);
    const stranger = await insertUser(t.store);
    await t.store.repos.challenges.insert({
      challenge: 'c-owned',
      user_id: owner,
      address: 'agent1y',
      expires_at: Date.now() + 60_000,
    });
    assert.equal(await t.store.repos.challenges.takeFor('c-owned', stranger, 'agent1y'), undefined);
    assert.equal(await t.store.repos.challenges.takeFor('c-owned', owner, 'agent1z'), undefined);
    assert.ok(await t.store.repos.challenges.takeFor('c-owned', owner, 'agent1y'));
  });

  it('deletes only expired challenges', async () => {
    const userId = await insertUser(t.store);
    const now = Date.now();
    await t.store.repos.challenges.insert({
      challenge: 'old',
      user_id: userId,
      address: 'a',
      expires_at: now - 1,
    });
    await t.store.repos.challenges.insert({
      challenge: 'new',
      user_id: userId,
      address: 'a',
      expires_at: now + 1000,
    });
    assert.ok((await t.store.repos.challenges.deleteExpired(now)) >= 1);
    assert.equal(await t.store.repos.challenges.takeFor('old', userId, 'a'), undefined);
    assert.ok(await t.store.repos.challenges.takeFor('new', userId, 'a'));
  });

  it('gives an address one owner when many users claim it at once', async () => {
    const users = await Promise.all(Array.from({ length: 8 }, () => insertUser(t.store)));
    const owners = await Promise.all(
      users.map((u) => t.store.repos.identities.claim('agent1race', u, Date.now())),
    );
    assert.equal(new Set(owners).size, 1);
    assert.ok(users.includes(owners[0]!));
    assert.equal((await t.store.repos.identities.find('agent1race'))?.user_id, owners[0]);
  });

  it('releases an identity only for its owner', async () => {
    const owner = await insertUser(t.store);
    const stranger = await insertUser(t.store);
    await t.store.repos.identities.claim('agent1release', owner, Date.now());
    assert.equal(await t.store.repos.identities.release('agent1release', stranger), false);
    assert.equal(await t.store.repos.identities.release('agent1release', owner), true);
    assert.equal(await t.store.repos.identities.find('agent1release'), undefined);
  });

  it('rolls a transaction back when its work fails', async () => {
    const userId = await insertUser(t.store);
    await assert.rejects(
      t.store.transaction(async (tx) => {
        await tx.identities.claim('agent1rollback', userId, Date.now());
        throw new Error('abort');
      }),
      /abort/,
    );
    assert.equal(await t.store.repos.identities.find('agent1rollback'), undefined);
  });
});

/**
 * Another writer on the same SQLite file, as an admin command run beside the server is: a
 * connection of its own on a thread of its own, which says when it is open, then inserts a
 * user when told to and says so.
 */
function otherWriter(path: string): Worker {
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    const Database = require(workerData.module);
    const db = new Database(workerData.path);
    db.pragma('busy_timeout = 5000');
    parentPort.postMessage('ready');
    parentPort.once('message', () => {
      db.prepare("insert into users (id, name, created_at) values ('other', 'other', 0)").run();
      db.close();
      parentPort.postMessage('written');
    });
  `;
  const module = createRequire(import.meta.url).resolve('better-sqlite3');
  return new Worker(code, { eval: true, workerData: { module, path } });
}

describe('store on SQLite beside another writer', () => {
  it('lets a transaction that read first still write when another connection writes meanwhile', async () => {
    const database = await createTestDatabase('sqlite');
    const store = Store.open(database.url);
    try {
      await store.migrate();
      const writer = otherWriter(sqlitePath(database.url));
      await once(writer, 'message');
      const written = once(writer, 'message');
      const firstToWrite = await store.transaction(async (tx) => {
        const before = await tx.users.count();
        writer.postMessage('write');
        // A transaction that took no lock at its read lets the other write now, and then
        // may not write itself; one that holds the lock makes the other wait for its commit.
        const first = await Promise.race([
          written.then(() => 'other'),
          sleep(300).then(() => 'this'),
        ]);
        await tx.users.insert({ id: 'this', name: 'this', created_at: before });
        return first;
      });
      await written;
      assert.equal(firstToWrite, 'this');
      assert.ok(await store.repos.users.findById('this'));
      assert.ok(await store.repos.users.findById('other'));
    } finally {
      await store.close();
      await database.drop();
    }
  });
});
