import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { CompiledStatements } from '../../src/store/compiled.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { insertUser, openTestStore, type TestStore } from '../kit/store.js';

describeOnEachDialect('statements compiled once per shape', (dialect) => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore(dialect);
  });
  after(() => t.close());

  /** Adds a user's stored bytes through `statements`, as the mailbox does. */
  const addStored = (statements: CompiledStatements, userId: string, bytes: number) =>
    statements.execute(t.store.db, 'user_storage.add 1', [userId, bytes], () =>
      t.store.db
        .insertInto('user_storage')
        .values({ user_id: userId, bytes_stored: bytes })
        .onConflict((oc) =>
          oc.column('user_id').doUpdateSet((eb) => ({
            bytes_stored: eb('user_storage.bytes_stored', '+', eb.ref('excluded.bytes_stored')),
          })),
        )
        .compile(),
    );

  const storedOf = async (userId: string) =>
    Number(
      (
        await t.store.db
          .selectFrom('user_storage')
          .select('bytes_stored')
          .where('user_id', '=', userId)
          .executeTakeFirstOrThrow()
      ).bytes_stored,
    );

  it('binds each call its own values to the text compiled for the shape', async () => {
    const statements = new CompiledStatements();
    const [first, second] = [await insertUser(t.store), await insertUser(t.store)];
    await addStored(statements, first, 10);
    // The same shape again: the builder is not asked, the values are this call's.
    let built = false;
    await statements.execute(t.store.db, 'user_storage.add 1', [second, 32], () => {
      built = true;
      throw new Error('compiled again');
    });
    await addStored(statements, first, 5);
    assert.equal(built, false);
    assert.equal(await storedOf(first), 15);
    assert.equal(await storedOf(second), 32);
  });

  it('refuses, before running anything, values listed out of the compiled order', async () => {
    const statements = new CompiledStatements();
    const userId = await insertUser(t.store);
    await assert.rejects(
      statements.execute(t.store.db, 'user_storage.add 1', [7, userId], () =>
        t.store.db
          .insertInto('user_storage')
          .values({ user_id: userId, bytes_stored: 7 })
          .compile(),
      ),
      /listed out of the compiled order/,
    );
    const row = await t.store.db
      .selectFrom('user_storage')
      .select('user_id')
      .where('user_id', '=', userId)
      .executeTakeFirst();
    assert.equal(row, undefined);
    // Nothing was kept for the shape: the next call compiles it, and checks again.
    await addStored(statements, userId, 7);
    assert.equal(await storedOf(userId), 7);
  });

  it('keeps at most its limit of shapes, the oldest going first', async () => {
    const statements = new CompiledStatements(2);
    const userId = await insertUser(t.store);
    const compiles: string[] = [];
    const select = (shape: string) =>
      statements.execute(t.store.db, shape, [userId], () => {
        compiles.push(shape);
        return t.store.db
          .selectFrom('user_storage')
          .select('bytes_stored')
          .where('user_id', '=', userId)
          .compile();
      });
    for (const shape of ['a', 'b', 'a', 'c', 'b', 'a']) await select(shape);
    assert.deepEqual(compiles, ['a', 'b', 'c', 'a']);
  });
});
