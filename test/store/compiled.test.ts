import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { CompiledStatements } from '../../src/store/compiled.js';
import { openDatabase } from '../../src/store/database.js';
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
    const statements = new CompiledStatements({ limit: 2 });
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

  /** The statement of {@link storedOf}, through `statements`, run prepared. */
  const storedPrepared = (statements: CompiledStatements, db: typeof t.store.db, userId: string) =>
    statements.execute(
      db,
      'user_storage.bytes',
      [userId],
      () =>
        db
          .selectFrom('user_storage')
          .select('bytes_stored')
          .where('user_id', '=', userId)
          .compile(),
      { prepared: true },
    );

  it('tells the database the text of a statement run prepared, once, and of no other', async () => {
    const kept: string[] = [];
    const statements = new CompiledStatements({ keepPrepared: (text) => kept.push(text) });
    const userId = await insertUser(t.store);
    await addStored(statements, userId, 3);
    await storedPrepared(statements, t.store.db, userId);
    await storedPrepared(statements, t.store.db, userId);
    assert.equal(kept.length, 1);
    assert.match(kept[0]!, /^select "bytes_stored" from "user_storage" where "user_id" = /);
  });

  if (dialect === 'postgres') {
    it('on PostgreSQL, runs a statement kept prepared by its name on each connection, which plans it once', async () => {
      const handle = openDatabase(t.url);
      try {
        const statements = new CompiledStatements({ keepPrepared: handle.keepPrepared });
        const [first, second] = [await insertUser(t.store), await insertUser(t.store)];
        await addStored(statements, first, 11);
        await addStored(statements, second, 22);
        // One connection, so that its own prepared statements can be read.
        await handle.db.connection().execute(async (db) => {
          const answers: number[] = [];
          for (let i = 0; i < 8; i++) {
            const { rows } = await storedPrepared(statements, db, i % 2 ? first : second);
            answers.push(Number(rows[0]!.bytes_stored));
          }
          assert.deepEqual(answers, [22, 11, 22, 11, 22, 11, 22, 11]);
          await addStored(statements, first, 1);
          const { rows } = await sql<{
            name: string;
            statement: string;
            generic_plans: number;
            custom_plans: number;
          }>`select name, statement, generic_plans, custom_plans from pg_prepared_statements`.execute(
            db,
          );
          // The statement not run prepared is not kept; the other was planned once for all
          // after the custom plans PostgreSQL tries first (five).
          assert.equal(rows.length, 1);
          assert.match(rows[0]!.statement, /from "user_storage" where "user_id" = \$1$/);
          assert.equal(rows[0]!.generic_plans + rows[0]!.custom_plans, 8);
          assert.ok(rows[0]!.generic_plans >= 1, `${rows[0]!.generic_plans} generic plans`);
        });
      } finally {
        await handle.close();
      }
    });
  }
});
