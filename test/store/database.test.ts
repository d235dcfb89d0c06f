import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { sql } from 'kysely';
import { sqlitePath } from '../../src/store/database.js';
import { Store } from '../../src/store/index.js';
import { createTestDatabase, testPgUrl } from '../kit/databases.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { insertUser, openTestStore, type TestStore } from '../kit/store.js';

describeOnEachDialect('store', (dialect) => {
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

describe(
  "the PostgreSQL pool's sessions",
  { skip: !testPgUrl && 'AGENTRY_TEST_PG_URL is unset' },
  () => {
    const setting = async (store: Store, name: 'jit' | 'search_path') => {
      const { rows } = await sql<{
        value: string;
      }>`select current_setting(${name}) as value`.execute(store.db);
      return rows[0]!.value;
    };

    it('run without JIT compilation, and with the options the URL gives, which come after', async () => {
      const database = await createTestDatabase('postgres');
      const store = Store.open(database.url);
      try {
        // The test database is a schema the URL selects through its options.
        const schema = new URL(database.url).searchParams.get('options')!.split('=')[1]!;
        assert.equal(await setting(store, 'jit'), 'off');
        assert.equal(await setting(store, 'search_path'), schema);
      } finally {
        await store.close();
      }
      const url = new URL(database.url);
      url.searchParams.set('options', `${url.searchParams.get('options')} -c jit=on`);
      const operators = Store.open(url.toString());
      try {
        assert.equal(await setting(operators, 'jit'), 'on');
      } finally {
        await operators.close();
        await database.drop();
      }
    });
  },
);
