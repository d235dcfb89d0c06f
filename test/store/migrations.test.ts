import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Migrator, sql } from 'kysely';
import { Store } from '../../src/store/index.js';
import { migrations } from '../../src/store/migrations/index.js';
import { createTestDatabase, type TestDatabase } from '../kit/databases.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { agentListing } from '../kit/store.js';

describeOnEachDialect('migrations of existing data', (dialect) => {
  let database: TestDatabase;
  let store: Store;
  before(async () => {
    database = await createTestDatabase(dialect);
    store = Store.open(database.url);
  });
  after(async () => {
    await store.close();
    await database.drop();
  });

  it("0005 totals each user's stored bytes from their mailboxes", async () => {
    const schema =
      dialect === 'postgres'
        ? (await sql<{ schema: string }>`select current_schema() as schema`.execute(store.db))
            .rows[0]!.schema
        : undefined;
    const migrator = new Migrator({
      db: store.db,
      provider: { getMigrations: async () => migrations },
      ...(schema ? { migrationTableSchema: schema } : {}),
    });
    assert.equal((await migrator.migrateTo('0004_almanac')).error, undefined);

    const mailboxes = [
      { user: 'u-many', address: 'agent1migratea', bytes: 700 },
      { user: 'u-many', address: 'agent1migrateb', bytes: 50 },
      { user: 'u-empty', address: 'agent1migratec', bytes: 0 },
    ];
    for (const id of ['u-many', 'u-empty', 'u-none']) {
      await store.db.insertInto('users').values({ id, name: id, created_at: 0 }).execute();
    }
    for (const { user, address, bytes } of mailboxes) {
      await store.repos.agents.save(agentListing({ address, user_id: user }));
      await sql`insert into mailboxes (address, user_id, pending_messages, bytes_stored, created_at)
        values (${address}, ${user}, 1, ${bytes}, 0)`.execute(store.db);
    }

    await store.migrate();
    const totals = await store.db
      .selectFrom('user_storage')
      .select(['user_id', 'bytes_stored'])
      .orderBy('user_id')
      .execute();
    assert.deepEqual(
      totals.map((row) => [row.user_id, Number(row.bytes_stored)]),
      [
        ['u-empty', 0],
        ['u-many', 750],
      ],
    );
    const found = await store.repos.mailbox.findManyWithOwnerUsage(
      ['agent1migrateb', 'agent1migratec'],
      '2031-01',
    );
    assert.deepEqual(
      [...found].map(([address, { ownerBytesStored }]) => [address, ownerBytesStored]).sort(),
      [
        ['agent1migrateb', 750],
        ['agent1migratec', 0],
      ],
    );
  });
});
