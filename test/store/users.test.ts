import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConflictError } from '../../src/errors.js';
import { UsersService } from '../../src/services/users.js';
import { Store } from '../../src/store/index.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { insertUser, openTestStore, type TestStore } from '../kit/store.js';

describeOnEachDialect('users store', (dialect) => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore(dialect);
  });
  after(() => t.close());

  it('finds users by id and name and counts them', async () => {
    const before = await t.store.repos.users.count();
    const id = await insertUser(t.store, 'alice-store');
    assert.equal((await t.store.repos.users.findByName('alice-store'))?.id, id);
    assert.equal((await t.store.repos.users.findById(id))?.name, 'alice-store');
    assert.equal(await t.store.repos.users.count(), before + 1);
  });

  // On SQLite, writers take turns (each transaction begins with the write lock), and two
  // connections in one thread would only wait on each other.
  const skip = dialect === 'sqlite' && 'SQLite serialises writers';
  it(
    'two processes creating the same user at once: one gets it, the other a conflict',
    { skip },
    async () => {
      // Two stores on one database, as two replicas bootstrapping together have.
      const other = Store.open(t.url);
      try {
        const clock = { now: () => Date.now() };
        const services = [t.store, other].map((store) => new UsersService(store, clock));
        for (let round = 0; round < 5; round++) {
          const name = `same-${round}`;
          const made = await Promise.allSettled(services.map((users) => users.createUser(name)));
          assert.deepEqual(made.map((result) => result.status).sort(), ['fulfilled', 'rejected']);
          const refused = made.find((result) => result.status === 'rejected');
          assert.ok(refused?.reason instanceof ConflictError, String(refused?.reason));
        }
      } finally {
        await other.close();
      }
    },
  );
});
