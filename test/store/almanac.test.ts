import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CompiledQuery, Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { isoTimestamp } from '../../src/wire/common.js';
import { CompiledStatements } from '../../src/store/compiled.js';
import { postgresConnection } from '../../src/store/database.js';
import {
  AlmanacRepository,
  type AlmanacRegistrationRow,
  type AlmanacStatusRow,
} from '../../src/store/repositories/almanac.js';
import type { Database } from '../../src/store/schema.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import {
  agentListing,
  insertHostedAgent,
  insertPresence,
  insertUser,
  openTestStore,
  type TestStore,
} from '../kit/store.js';
import { TestIdentity } from '../kit/uagent.js';

const HOUR = 3600 * 1000;

/** A node of PostgreSQL's plan (`explain (format json)`), with the steps it runs on. */
interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  Plans?: PlanNode[];
}

/** Every node of a plan. */
function flatten(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(flatten)];
}

function registration(address: string, signedAt: number, url: string): AlmanacRegistrationRow {
  return {
    address,
    prefix: 'agent',
    endpoints: JSON.stringify([{ url, weight: 1 }]),
    protocols: '[]',
    metadata: null,
    signed_at: signedAt,
    signature: `sig-${signedAt}`,
    expires_at: signedAt + 48 * HOUR,
    updated_at: signedAt,
  };
}

function status(address: string, signedAt: number): AlmanacStatusRow {
  return {
    address,
    is_active: 0,
    signed_at: signedAt,
    signature: `sig-${signedAt}`,
    updated_at: signedAt,
  };
}

describe('isoTimestamp', () => {
  it('prints UTC with microseconds and +00:00, as datetime.isoformat does', () => {
    assert.equal(
      isoTimestamp(Date.UTC(2026, 10, 21, 10, 0, 0, 123)),
      '2026-11-21T10:00:00.123000+00:00',
    );
  });
});

describeOnEachDialect('almanac store', (dialect) => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore(dialect);
  });
  after(() => t.close());

  /** Whether `row` was stored, written alone. */
  const upsertOne = async (row: AlmanacRegistrationRow): Promise<boolean> =>
    (await t.store.repos.almanac.upsertRegistrations([row])).has(row.address);

  it('tells, of each registration stored, whether its agent is registered here', async () => {
    const userId = await insertUser(t.store);
    const [agent, stranger, older] = Array.from({ length: 3 }, () => TestIdentity.random().address);
    await t.store.repos.agents.save(agentListing({ address: agent!, user_id: userId }));
    await t.store.repos.agents.save(agentListing({ address: older!, user_id: userId }));
    const base = Date.UTC(2026, 10, 29);
    assert.ok(await upsertOne(registration(older!, base, 'http://127.0.0.1:8001/submit')));
    const stored = await t.store.repos.almanac.upsertRegistrations([
      registration(agent!, base, 'http://127.0.0.1:8001/submit'),
      registration(stranger!, base, 'http://127.0.0.1:8001/submit'),
      // Older than what is stored: not written, so not told.
      registration(older!, base - 1000, 'http://127.0.0.1:8001/submit'),
    ]);
    assert.deepEqual(
      new Map([...stored].sort()),
      new Map([
        [agent!, true],
        [stranger!, false],
      ]),
    );
  });

  it('registers with the protocol index in step: new, the same again, others declared, older', async () => {
    const { almanac } = t.store.repos;
    const userId = await insertUser(t.store);
    const [listed, other, stale] = Array.from({ length: 3 }, () => TestIdentity.random().address);
    await t.store.repos.agents.save(agentListing({ address: listed!, user_id: userId }));
    const base = Date.UTC(2026, 11, 1);
    const declaring = (address: string, signedAt: number, protocols: string[]) => ({
      ...registration(address, signedAt, 'http://127.0.0.1:8003/submit'),
      protocols: JSON.stringify(protocols),
    });
    const protocolRows = async () =>
      (
        await sql<{ address: string; digest: string }>`select address, digest
          from almanac_protocols where address in (${listed}, ${other}, ${stale})
          order by address, digest`.execute(t.store.db)
      ).rows
        .map(
          (row) =>
            `${row.address === listed ? 'listed' : row.address === other ? 'other' : 'stale'} ${row.digest}`,
        )
        .sort();
    // As the service runs it: in a transaction on SQLite, alone on PostgreSQL.
    const register = (rows: AlmanacRegistrationRow[], digests: [string, string[]][]) =>
      dialect === 'postgres'
        ? almanac.register(rows, new Map(digests))
        : t.store.transaction((tx) => tx.almanac.register(rows, new Map(digests)));

    // New: nothing declared before; the digests as given, each once.
    const first = await register(
      [declaring(listed!, base, ['proto:a', 'proto:b']), declaring(other!, base, ['proto:a'])],
      [
        [listed!, ['a', 'b', 'a']],
        [other!, ['a']],
      ],
    );
    assert.deepEqual(
      new Map([...first].sort()),
      new Map(
        [
          [listed!, { agent: true, before: undefined }],
          [other!, { agent: false, before: undefined }],
        ].sort() as [string, { agent: boolean; before: undefined }][],
      ),
    );
    assert.deepEqual(await protocolRows(), ['listed a', 'listed b', 'other a'].sort());

    // Again with what it declared before: its rows stay (the digests given are not read).
    const again = await register(
      [declaring(listed!, base + 1000, ['proto:a', 'proto:b'])],
      [[listed!, ['x']]],
    );
    assert.deepEqual([...again], [[listed!, { agent: true, before: '["proto:a","proto:b"]' }]]);
    assert.deepEqual(await protocolRows(), ['listed a', 'listed b', 'other a'].sort());

    // Others declared: one kept, one gone, one new; an older registration changes nothing.
    const changed = await register(
      [
        declaring(listed!, base + 2000, ['proto:b', 'proto:c']),
        declaring(other!, base - 1000, ['proto:z']),
        declaring(stale!, base, []),
      ],
      [
        [listed!, ['b', 'c']],
        [other!, ['z']],
        [stale!, []],
      ],
    );
    assert.deepEqual(
      new Map([...changed].sort()),
      new Map(
        [
          [listed!, { agent: true, before: '["proto:a","proto:b"]' }],
          [stale!, { agent: false, before: undefined }],
        ].sort() as [string, { agent: boolean; before: string | undefined }][],
      ),
    );
    assert.deepEqual(await protocolRows(), ['listed b', 'listed c', 'other a'].sort());
    assert.equal((await almanac.findRegistration(other!))?.signed_at, base);
    assert.equal((await almanac.findRegistration(listed!))?.protocols, '["proto:b","proto:c"]');
  });

  it(
    'finds the protocol rows a registration replaces by its agent, never reading a table whole',
    { skip: dialect !== 'postgres' },
    async () => {
      // A registry of 50,000 agents declaring two protocols each: on a few thousand rows,
      // reading a table whole is what the planner rightly prefers.
      const far = Date.UTC(2030, 0, 1);
      await sql`insert into almanac_registrations
          (address, prefix, endpoints, protocols, signed_at, signature, expires_at, updated_at)
        select 'agent1plan' || i, 'agent', '[]', '["proto:p1","proto:p2"]', 0, 'sig', ${far}, i
        from generate_series(1, 50000) as i`.execute(t.store.db);
      await sql`insert into almanac_protocols (digest, address)
        select d, 'agent1plan' || i
        from generate_series(1, 50000) as i, unnest(array['p1', 'p2']) as d`.execute(t.store.db);

      const statements: CompiledQuery[] = [];
      const db = new Kysely<Database>({
        dialect: new PostgresDialect({ pool: new pg.Pool(postgresConnection(t.url)) }),
        log: (event) => void statements.push(event.query),
      });
      try {
        // A group as the service writes it: agents declaring other protocols, and new ones.
        const base = Date.UTC(2026, 11, 2);
        const rows = Array.from({ length: 40 }, (_, i) => ({
          ...registration(
            i < 20 ? `agent1plan${i * 97 + 1}` : TestIdentity.random().address,
            base,
            'http://127.0.0.1:8004/submit',
          ),
          protocols: '["proto:p1","proto:p3"]',
        }));
        const almanac = new AlmanacRepository(db, new CompiledStatements(), 'postgres');
        await almanac.register(rows, new Map(rows.map((row) => [row.address, ['p1', 'p3']])));
        assert.equal(statements.length, 1);
        const { sql: text, parameters } = statements[0]!;
        const { rows: kept } = await sql<{ digest: string }>`select digest from almanac_protocols
          where address = 'agent1plan1' order by digest`.execute(t.store.db);
        assert.deepEqual(
          kept.map((row) => row.digest),
          ['p1', 'p3'],
        );

        /** The Almanac's tables the statement's plan reads whole. */
        const readWhole = async () => {
          const { rows: explained } = await db.executeQuery<{
            'QUERY PLAN': { Plan: PlanNode }[];
          }>(CompiledQuery.raw(`explain (format json) ${text}`, [...parameters]));
          const plan = explained[0]!['QUERY PLAN'][0]!.Plan;
          const tables = flatten(plan)
            .filter((node) => node['Node Type'] === 'Seq Scan')
            .map((node) => node['Relation Name'])
            .filter((table) => table === 'almanac_registrations' || table === 'almanac_protocols');
          return { tables, plan: JSON.stringify(plan, null, 1) };
        };
        // As the tables grew, before PostgreSQL analysed them (a delete joined to the changed
        // agents alone read the protocol index whole then), and after.
        const grown = await readWhole();
        assert.deepEqual(grown.tables, [], grown.plan);
        await sql`analyze almanac_registrations, almanac_protocols`.execute(t.store.db);
        const analysed = await readWhole();
        assert.deepEqual(analysed.tables, [], analysed.plan);
      } finally {
        await db.destroy();
      }
    },
  );

  it('stores a group of registrations in one statement, each only when newer', async () => {
    const base = Date.UTC(2026, 10, 21);
    const [fresh, newer, older, resent] = Array.from({ length: 4 }, () => TestIdentity.random());
    const stored = [newer, older, resent].map((agent) =>
      registration(agent!.address, base, 'http://127.0.0.1:8001/submit'),
    );
    assert.equal((await t.store.repos.almanac.upsertRegistrations(stored)).size, 3);
    const group = [
      registration(fresh!.address, base, 'http://127.0.0.1:8002/submit'),
      registration(newer!.address, base + 1000, 'http://127.0.0.1:8002/submit'),
      registration(older!.address, base - 1000, 'http://127.0.0.1:8002/submit'),
      stored[2]!,
    ];
    assert.deepEqual(
      [...(await t.store.repos.almanac.upsertRegistrations(group)).keys()].sort(),
      [fresh!.address, newer!.address].sort(),
    );
    assert.equal((await t.store.repos.almanac.findRegistration(older!.address))?.signed_at, base);
    assert.equal(
      (await t.store.repos.almanac.findRegistration(newer!.address))?.signed_at,
      base + 1000,
    );
  });

  it('keeps the newest of racing registrations, whatever order they commit in', async () => {
    const { address } = TestIdentity.random();
    const base = Date.UTC(2026, 10, 21);
    const rows = Array.from({ length: 8 }, (_, i) =>
      registration(address, base + i * 1000, `http://127.0.0.1:800${i}/submit`),
    ).reverse();
    const stored = await Promise.all(rows.map((row) => upsertOne(row)));
    assert.ok(stored.includes(true));
    const kept = await t.store.repos.almanac.findRegistration(address);
    assert.equal(kept?.signed_at, base + 7000);
    assert.equal(
      kept?.endpoints,
      JSON.stringify([{ url: 'http://127.0.0.1:8007/submit', weight: 1 }]),
    );
  });

  it('reports an older registration, or the stored one again, as not stored', async () => {
    const { address } = TestIdentity.random();
    const row = registration(address, Date.UTC(2026, 10, 21), 'http://127.0.0.1:8001/submit');
    assert.equal(await upsertOne(row), true);
    assert.equal(await upsertOne(row), false);
    const older = { ...row, signed_at: row.signed_at - 1000, endpoints: '[]' };
    assert.equal(await upsertOne(older), false);
    assert.equal((await t.store.repos.almanac.findRegistration(address))?.endpoints, row.endpoints);
    const sameSecond = { ...row, signature: 'another', endpoints: '[]' };
    assert.equal(await upsertOne(sameSecond), true);
    assert.equal((await t.store.repos.almanac.findRegistration(address))?.endpoints, '[]');
  });

  it('lets the last status of a second win, whatever it says', async () => {
    const almanac = t.store.repos.almanac;
    const signedAt = Date.UTC(2026, 10, 21);
    for (const activeFirst of [true, false]) {
      const { address } = TestIdentity.random();
      const active = { ...status(address, signedAt), is_active: 1, signature: 'sig-on' };
      const inactive = { ...status(address, signedAt), signature: 'sig-off' };
      const [first, second] = activeFirst ? [active, inactive] : [inactive, active];
      assert.equal(await almanac.upsertStatus(first), true);
      assert.equal(await almanac.upsertStatus(second), true);
      assert.equal((await almanac.findStatus(address))?.is_active, second.is_active);
      assert.equal(await almanac.upsertStatus(second), false, 'the same status again');
      const older = { ...first, signed_at: signedAt - 1000, signature: 'sig-older' };
      assert.equal(await almanac.upsertStatus(older), false);
    }
  });

  it('sweeps expired registrations and stale statuses of unregistered agents only', async () => {
    // Before the moments the other tests use, so that only this test's rows are stale.
    const now = Date.UTC(2026, 10, 1);
    const almanac = t.store.repos.almanac;
    const expired = TestIdentity.random().address;
    const live = TestIdentity.random().address;
    const orphan = TestIdentity.random().address;
    const recentOrphan = TestIdentity.random().address;
    await upsertOne(registration(expired, now - 49 * HOUR, 'http://a/'));
    await upsertOne(registration(live, now - HOUR, 'http://b/'));
    await almanac.upsertStatus(status(expired, now - 49 * HOUR));
    await almanac.upsertStatus(status(live, now - 72 * HOUR));
    await almanac.upsertStatus(status(orphan, now - 49 * HOUR));
    await almanac.upsertStatus(status(recentOrphan, now - HOUR));

    assert.equal(await almanac.deleteExpired(now, now - 48 * HOUR), 3);
    assert.equal(await almanac.findRegistration(expired), undefined);
    assert.ok(await almanac.findRegistration(live));
    assert.equal(await almanac.findStatus(expired), undefined);
    assert.equal(await almanac.findStatus(orphan), undefined);
    assert.ok(await almanac.findStatus(live), "a registered agent's status stays");
    assert.ok(await almanac.findStatus(recentOrphan));
  });

  it('reads in the resolvable record what the one rule of active says of a registered agent', async () => {
    const { almanac, agents } = t.store.repos;
    const userId = await insertUser(t.store);
    const registeredAt = Date.UTC(2026, 10, 21);
    const now = registeredAt + HOUR;
    const presence = (
      address: string,
      status: string,
      statusAt: number,
      lastSeenAt?: number | null,
    ) => insertPresence(t.store, address, status, statusAt, lastSeenAt);
    const hosted = async (address: string, state: string) => {
      await agents.save(agentListing({ address, user_id: userId }));
      await insertHostedAgent(t.store, { address, ownerId: userId, state, at: registeredAt });
    };
    // Each agent registered at registeredAt, then in one of the states the rule looks at.
    const cases: [string, (address: string) => Promise<unknown>][] = [
      ['nothing else', async () => {}],
      ['stopped by a signed status', (a) => almanac.upsertStatus(status(a, registeredAt + 1))],
      ['gone since registering', (a) => presence(a, 'offline', registeredAt + 1)],
      ['gone before registering', (a) => presence(a, 'offline', registeredAt - 1)],
      ['gone in its own millisecond', (a) => presence(a, 'offline', registeredAt)],
      ['unreachable since registering', (a) => presence(a, 'unreachable', registeredAt + 1)],
      ['seen working', (a) => presence(a, 'active', registeredAt + 1)],
      ['unreachable, never seen', (a) => presence(a, 'unreachable', registeredAt + 1, null)],
      ['hosted and running', (a) => hosted(a, 'running')],
      ['hosted and stopped', (a) => hosted(a, 'stopped')],
    ];
    for (const [name, arrange] of cases) {
      const { address } = TestIdentity.random();
      await arrange(address);
      await upsertOne(registration(address, registeredAt, 'http://c/'));
      for (const at of [now, registeredAt + 49 * HOUR]) {
        const expected = (await almanac.activeAt(address, at)) ? 1 : 0;
        const row = await almanac.findResolvable(address, at);
        assert.equal(row?.active, expected, `${name}, ${at === now ? 'registered' : 'expired'}`);
      }
    }
  });

  it('says in the resolvable record whether the agent is active then, by its last status', async () => {
    const almanac = t.store.repos.almanac;
    const { address } = TestIdentity.random();
    const signedAt = Date.UTC(2026, 10, 21);
    await upsertOne(registration(address, signedAt, 'http://c/'));
    assert.equal((await almanac.findResolvable(address, signedAt + HOUR))?.active, 1);
    assert.equal((await almanac.findResolvable(address, signedAt + 49 * HOUR))?.active, 0);
    await almanac.upsertStatus(status(address, signedAt + HOUR));
    assert.equal((await almanac.findResolvable(address, signedAt + 2 * HOUR))?.active, 0);
  });

  it('goes on answering look-ups after a migration adds a column to the registrations', async () => {
    // Each PostgreSQL connection keeps the look-up prepared: a newer replica's migration must
    // not break the connections of the older ones that kept it.
    const own = await openTestStore(dialect);
    try {
      const almanac = own.store.repos.almanac;
      const signedAt = Date.UTC(2026, 10, 21);
      const addresses = Array.from({ length: 8 }, () => TestIdentity.random().address);
      await almanac.upsertRegistrations(
        addresses.map((address) => registration(address, signedAt, 'http://c/')),
      );
      const lookUpAll = () =>
        Promise.all(addresses.map((address) => almanac.findResolvable(address, signedAt + HOUR)));
      // Several connections at once, each more than the five runs before a generic plan.
      for (let i = 0; i < 7; i++) await lookUpAll();
      await sql`alter table almanac_registrations add column added_later text`.execute(
        own.store.db,
      );
      const rows = await lookUpAll();
      assert.deepEqual(
        rows.map((row) => [row?.active, JSON.parse(row?.endpoints ?? '[]')[0]?.url]),
        addresses.map(() => [1, 'http://c/']),
      );
    } finally {
      await own.close();
    }
  });
});
