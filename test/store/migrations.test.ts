import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { Migrator, sql } from 'kysely';
import { Store } from '../../src/store/index.js';
import { migrations } from '../../src/store/migrations/index.js';
// Today's mailbox writes count days: the data of older schemas is written with the table made.
import * as usageDays from '../../src/store/migrations/0037_usage_days.js';
import { createTestDatabase, type TestDatabase } from '../kit/databases.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { agentListing } from '../kit/store.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

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

  /** Migrates `on` (the shared store unless told) to the migration `name`, and no further. */
  async function migrateTo(name: string, on: Store = store): Promise<void> {
    const schema =
      dialect === 'postgres'
        ? (await sql<{ schema: string }>`select current_schema() as schema`.execute(on.db)).rows[0]!
            .schema
        : undefined;
    const migrator = new Migrator({
      db: on.db,
      provider: { getMigrations: async () => migrations },
      ...(schema ? { migrationTableSchema: schema } : {}),
    });
    assert.equal((await migrator.migrateTo(name)).error, undefined);
  }

  it("0005 totals each user's stored bytes from their mailboxes", async () => {
    await migrateTo('0004_almanac');

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
      '2031-01-15',
    );
    assert.deepEqual(
      [...found].map(([address, { ownerBytesStored }]) => [address, ownerBytesStored]).sort(),
      [
        ['agent1migrateb', 750],
        ['agent1migratec', 0],
      ],
    );
  });

  it('0011 moves stored messages the client cannot take into quarantine, off the counters', async () => {
    await migrateTo('0005_user_storage');
    const agent = TestIdentity.random();
    await store.db.insertInto('users').values({ id: 'u-q', name: 'u-q', created_at: 0 }).execute();
    await store.repos.agents.save(agentListing({ address: agent.address, user_id: 'u-q' }));
    await store.repos.mailbox.open({ address: agent.address, user_id: 'u-q', created_at: 0 });
    const sender = TestIdentity.random();
    const good = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: agent.address, payloadJson: '{}' }),
    );
    const texts = [
      JSON.stringify(good),
      JSON.stringify({ ...good, target: agent.address.toUpperCase() }),
      JSON.stringify({ ...good, payload: '%%%' }),
      JSON.stringify({ ...good, extra: JSON.parse(`${'['.repeat(100)}${']'.repeat(100)}`) }),
      JSON.stringify({ ...good, extra: { shallow: true } }),
    ];
    const now = Date.now();
    await usageDays.up(store.db);
    await store.repos.mailbox.deliver(
      texts.map((text, index) => ({
        uuid: `00000000-0000-4000-8000-00000000000${index}`,
        address: agent.address,
        envelope: text,
        size: Buffer.byteLength(text),
        received_at: now,
        expires_at: now + 60_000,
      })),
      '2031-01-15',
    );

    await store.migrate();
    const left = await store.repos.mailbox.listPending(agent.address, now, {
      limit: 10,
      offset: 0,
    });
    assert.deepEqual(
      left.map((message) => message.envelope),
      [texts[0], texts[4]],
    );
    const quarantined = await store.repos.mailbox.listQuarantined(agent.address, {
      limit: 10,
      offset: 0,
    });
    assert.deepEqual(
      quarantined.map((message) => [message.envelope, message.reason.split(':')[0]]),
      [
        [texts[1], 'target'],
        [texts[2], 'payload'],
        [texts[3], 'nests deeper than 32 levels'],
      ],
    );
    const mailbox = (await store.repos.mailbox.find(agent.address))!;
    assert.equal(Number(mailbox.pending_messages), 2);
    assert.equal(
      Number(mailbox.bytes_stored),
      Buffer.byteLength(texts[0]!) + Buffer.byteLength(texts[4]!),
    );
    const owner = await store.repos.mailbox.findWithOwnerUsage(agent.address, '2031-01');
    assert.equal(owner?.ownerBytesStored, Number(mailbox.bytes_stored));
  });

  it('0014 keeps failed forwards for the agents listed before, and forwards none of their messages', async () => {
    await migrateTo('0012_poll_trace');
    const agent = TestIdentity.random();
    await store.db.insertInto('users').values({ id: 'u-k', name: 'u-k', created_at: 0 }).execute();
    await store.repos.agents.save(
      agentListing({ address: agent.address, user_id: 'u-k', redirect_url: 'https://k.example' }),
    );
    await store.repos.mailbox.open({ address: agent.address, user_id: 'u-k', created_at: 0 });
    const uuid = '00000000-0000-4000-8000-000000000014';
    await usageDays.up(store.db);
    await store.repos.mailbox.deliver(
      [
        {
          uuid,
          address: agent.address,
          envelope: '{}',
          size: 2,
          received_at: 1,
          expires_at: Number.MAX_SAFE_INTEGER,
        },
      ],
      '2031-01-15',
    );

    await store.migrate();
    assert.deepEqual(await store.repos.agents.findForwarding(agent.address), {
      url: 'https://k.example',
      keep: true,
      failing: false,
    });
    const [pending] = await store.repos.mailbox.listPending(agent.address, 2, {
      limit: 10,
      offset: 0,
    });
    assert.equal(pending?.next_forward_at, null);
    assert.deepEqual(await store.repos.mailbox.claimForwards(Date.now(), Date.now() + 1, 10), []);
    const [, stored] = await store.repos.deliveries.list(agent.address, {
      uuid,
      limit: 10,
      offset: 0,
    });
    assert.deepEqual([stored?.event, stored?.detail], ['stored', null], 'not kept');
  });

  it('0006 indexes the listings and the protocols of the registrations already stored', async () => {
    const scratch = await createTestDatabase(dialect);
    const old = Store.open(scratch.url);
    try {
      await migrateTo('0005_user_storage', old);
      await old.db.insertInto('users').values({ id: 'u', name: 'u', created_at: 0 }).execute();
      await old.repos.agents.save(
        agentListing({ address: 'agent1listed', user_id: 'u', name: 'Weather oracle' }),
      );
      const digest = 'ab'.repeat(32);
      await old.db
        .insertInto('almanac_registrations')
        .values({
          address: 'agent1listed',
          prefix: 'agent',
          endpoints: '[{"url":"http://127.0.0.1:1/submit","weight":1}]',
          protocols: JSON.stringify([digest, `proto:${digest}`]),
          metadata: null,
          signed_at: 0,
          signature: 'sig1',
          expires_at: 1e15,
          updated_at: 0,
        })
        .execute();

      await old.migrate();
      const byProtocol = await old.repos.search.almanacByProtocol(`proto:${digest}`, 0, 0, {
        offset: 0,
        limit: 10,
      });
      assert.deepEqual(
        byProtocol.map((row) => [row.address, row.name]),
        [['agent1listed', 'Weather oracle']],
      );
      const byText = await old.repos.search.almanacByText(
        { words: ['oracle'], exact: true },
        0,
        0,
        {
          offset: 0,
          limit: 10,
        },
      );
      assert.deepEqual(
        byText.map((row) => row.address),
        ['agent1listed'],
      );
    } finally {
      await old.close();
      await scratch.drop();
    }
  });
  it('0028 leaves each enrolled handle to one agent, the same one on every database, and makes it unique', async () => {
    const scratch = await createTestDatabase(dialect);
    const old = Store.open(scratch.url);
    try {
      await migrateTo('0027_agent_probes', old);
      await old.db.insertInto('users').values({ id: 'u', name: 'u', created_at: 0 }).execute();
      const enrol = (address: string, handle: string, createdAt: number) =>
        old.db
          .insertInto('agent_enrolments')
          .values({ address, user_id: 'u', name: address, handle, created_at: createdAt })
          .execute();
      // Three enrolled `weather`: the one whose listing carries it keeps it, though enrolled last.
      await enrol('agent1qearlyxxxxxxxxaaaaaaaa', 'weather', 1);
      await enrol('agent1qsametimebbbbbbbbbbbb', 'weather', 1);
      await enrol('agent1qlistedcccccccccccccc', 'weather', 5);
      await old.repos.agents.save(
        agentListing({ address: 'agent1qlistedcccccccccccccc', user_id: 'u', handle: 'weather' }),
      );
      // Two enrolled `news`, neither listed: the earliest keeps it (then the lowest address).
      await enrol('agent1qnewsbbbbbbbbbbbbbbbb', 'news', 2);
      await enrol('agent1qnewsaaaaaaaaaaaaaaaa', 'news', 2);
      await enrol('agent1qalonedddddddddddddddd', 'alone', 3);

      await old.migrate();
      const rows = await old.db
        .selectFrom('agent_enrolments')
        .select(['address', 'handle'])
        .orderBy('address')
        .execute();
      assert.deepEqual(
        rows.map((row) => [row.address, row.handle]),
        [
          ['agent1qalonedddddddddddddddd', 'alone'],
          ['agent1qearlyxxxxxxxxaaaaaaaa', 'weather-aaaaaaaa'],
          ['agent1qlistedcccccccccccccc', 'weather'],
          ['agent1qnewsaaaaaaaaaaaaaaaa', 'news'],
          ['agent1qnewsbbbbbbbbbbbbbbbb', 'news-bbbbbbbb'],
          ['agent1qsametimebbbbbbbbbbbb', 'weather-bbbbbbbb'],
        ],
      );
      await assert.rejects(() => enrol('agent1qlatecomerxxxxxxxxxxx', 'alone', 9));
    } finally {
      await old.close();
      await scratch.drop();
    }
  });
  it('0036 indexes the manifests stored before by name and by model', async () => {
    const scratch = await createTestDatabase(dialect);
    const old = Store.open(scratch.url);
    try {
      await migrateTo('0033_federation', old);
      const model = `model:${'1'.repeat(64)}`;
      const manifest = (digest: string, name: unknown, models: unknown[]) => ({
        digest,
        manifest: JSON.stringify({ version: '1.0', metadata: { name, version: '0.2' }, models }),
        verified: 1,
        stored_at: 1,
      });
      await old.db
        .insertInto('almanac_manifests')
        .values([
          manifest(`proto:${'a'.repeat(64)}`, 'weather', [{ digest: model, schema: {} }]),
          // Nothing of a manifest that names no name and holds no model is made up.
          manifest(`proto:${'b'.repeat(64)}`, 7, [{ schema: {} }]),
        ] as never)
        .execute();

      await old.migrate();
      const named = await old.repos.almanac.manifestsNamed('weather');
      assert.deepEqual(
        named.map((row) => [row.digest, row.version]),
        [[`proto:${'a'.repeat(64)}`, '0.2']],
      );
      assert.equal((await old.repos.almanac.manifestWithModel(model))?.digest, named[0]!.digest);
      const unnamed = await old.repos.almanac.findManifest(`proto:${'b'.repeat(64)}`);
      assert.equal(unnamed?.name, null);
    } finally {
      await old.close();
      await scratch.drop();
    }
  });

  it('0038 keeps the protocols of the registrations stored before, searchable and deleted with them', async () => {
    const scratch = await createTestDatabase(dialect);
    const old = Store.open(scratch.url);
    try {
      await migrateTo('0037_usage_days', old);
      const digest = `proto:${'cd'.repeat(32)}`;
      const registration = (address: string, expiresAt: number) => ({
        address,
        prefix: 'agent',
        endpoints: '[{"url":"http://127.0.0.1:1/submit","weight":1}]',
        protocols: JSON.stringify([digest]),
        metadata: null,
        signed_at: 0,
        signature: `sig-${address}`,
        expires_at: expiresAt,
        updated_at: 0,
      });
      await old.db
        .insertInto('almanac_registrations')
        .values([registration('agent1kept', 1e15), registration('agent1lapsed', 10)])
        .execute();
      await old.db
        .insertInto('almanac_protocols')
        .values([
          { digest, address: 'agent1kept' },
          { digest, address: 'agent1lapsed' },
        ])
        .execute();

      await old.migrate();
      const page = { offset: 0, limit: 10 };
      const found = async () =>
        (await old.repos.search.almanacByProtocol(digest, 0, 0, page)).map((row) => row.address);
      assert.deepEqual((await found()).sort(), ['agent1kept', 'agent1lapsed']);
      await old.repos.almanac.deleteExpired(100, 0);
      assert.deepEqual(await found(), ['agent1kept']);
      const left = await old.db.selectFrom('almanac_protocols').select('address').execute();
      assert.deepEqual(
        left.map((row) => row.address),
        ['agent1kept'],
      );
    } finally {
      await old.close();
      await scratch.drop();
    }
  });
});
