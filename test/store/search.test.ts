import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect, sql, type CompiledQuery } from 'kysely';
import { sqlitePath } from '../../src/store/database.js';
import {
  presenceGoneSince,
  type AlmanacRegistrationRow,
  type AlmanacStatusRow,
} from '../../src/store/repositories/almanac.js';
import { SearchRepository, type SearchState } from '../../src/store/repositories/search.js';
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

const NOW = Date.UTC(2031, 0, 1);
const HOUR = 3600 * 1000;
const LIFETIME = 48 * HOUR;
const PAGE = { offset: 0, limit: 1000 };

const digestOf = (name: string) =>
  `proto:${createHash('sha256').update(`search test ${name}`).digest('hex')}`;

function registration(address: string, protocols: string[], at: number): AlmanacRegistrationRow {
  return {
    address,
    prefix: 'agent',
    endpoints: JSON.stringify([{ url: `http://127.0.0.1:9/${address}`, weight: 1 }]),
    protocols: JSON.stringify(protocols),
    metadata: null,
    signed_at: at,
    signature: `sig-${at}`,
    expires_at: NOW + LIFETIME,
    updated_at: at,
  };
}

function stopped(address: string, at: number): AlmanacStatusRow {
  return { address, is_active: 0, signed_at: at, signature: `sig-${at}`, updated_at: at };
}

describeOnEachDialect('Almanac search by protocol', (dialect) => {
  let t: TestStore;
  const [rare, common, other] = ['rare', 'common', 'other'].map(digestOf) as [
    string,
    string,
    string,
  ];
  /** Who declares what: every agent `common`, one in fifty `rare` too, the rest `other`. */
  const declared = new Map<string, string[]>();

  before(async () => {
    t = await openTestStore(dialect);
    for (let i = 0; i < 500; i++) {
      const address = `agent1search${String(i).padStart(4, '0')}`;
      declared.set(address, i % 50 === 0 ? [common, rare] : [common, other]);
    }
    const { almanac } = t.store.repos;
    const rows = [...declared].map(([address, protocols], i) =>
      registration(address, protocols, NOW - i),
    );
    await almanac.upsertRegistrations(rows);
    await almanac.replaceProtocols(declared, []);
  });
  after(() => t.close());

  const declaring = (digest: string) =>
    [...declared].filter(([, protocols]) => protocols.includes(digest)).map(([a]) => a);

  it('finds exactly the registrations declaring the digest, newest first, page by page', async () => {
    const { search } = t.store.repos;
    const found = await search.almanacByProtocol(rare, NOW, LIFETIME, PAGE);
    // Registered at NOW - i: the lowest numbers are the newest.
    assert.deepEqual(
      found.map((row) => row.address),
      declaring(rare),
    );
    const all = await search.almanacByProtocol(common, NOW, LIFETIME, PAGE);
    assert.equal(all.length, 500);
    const second = await search.almanacByProtocol(common, NOW, LIFETIME, {
      offset: 100,
      limit: 50,
    });
    assert.deepEqual(
      second.map((row) => row.address),
      all.slice(100, 150).map((row) => row.address),
    );
    assert.deepEqual(await search.almanacByProtocol(digestOf('nobody'), NOW, LIFETIME, PAGE), []);
  });

  it('lists the most recent unexpired registrations, newest first, as many as asked', async () => {
    const { search } = t.store.repos;
    const recent = await search.almanacRecent(NOW, LIFETIME, 30);
    assert.deepEqual(
      recent.map((row) => row.address),
      [...declared.keys()].slice(0, 30),
    );
    assert.deepEqual(await search.almanacRecent(NOW + LIFETIME + 1, LIFETIME, 30), []);
  });

  /** The plan SQLite takes for the one statement `search` runs, step by step. */
  async function planOf(search: (repository: SearchRepository) => Promise<unknown>) {
    const sqlite = new BetterSqlite3(sqlitePath(t.url), { readonly: true });
    try {
      const statements: CompiledQuery[] = [];
      const db = new Kysely<Database>({
        dialect: new SqliteDialect({ database: sqlite }),
        log: (event) => void statements.push(event.query),
      });
      await search(new SearchRepository(db, 'sqlite'));
      assert.equal(statements.length, 1);
      const { sql, parameters } = statements[0]!;
      return sqlite
        .prepare(`explain query plan ${sql}`)
        .all(...(parameters as unknown[]))
        .map((step) => (step as { detail: string }).detail);
    } finally {
      sqlite.close();
    }
  }

  // A search by protocol stays an index look-up whatever the size of the Almanac
  // (docs/almanac.md): neither the registrations nor the agents are ever read whole.
  const readsWhole = (plan: string[]) => plan.some((step) => /^SCAN (r|a)\b/.test(step));

  it(
    'starts from the digest, not from every registration or agent',
    { skip: dialect !== 'sqlite' },
    async () => {
      const plan = await planOf((search) => search.almanacByProtocol(rare, NOW, LIFETIME, PAGE));
      assert.ok(
        plan.some((step) =>
          /^SEARCH ap USING .*INDEX almanac_protocols_digest \(digest=\?\)/.test(step),
        ),
        plan.join('\n'),
      );
      assert.ok(!readsWhole(plan), plan.join('\n'));
    },
  );

  it(
    'reads the most recent registrations by time, and no agent it has no use for',
    { skip: dialect !== 'sqlite' },
    async () => {
      const plan = await planOf((search) => search.almanacRecent(NOW, LIFETIME, 100));
      assert.ok(
        plan.some((step) =>
          /^SCAN (r|latest) USING INDEX almanac_registrations_updated_at/.test(step),
        ),
        plan.join('\n'),
      );
      assert.ok(!plan.some((step) => /^SCAN a\b/.test(step)), plan.join('\n'));
    },
  );
});

describeOnEachDialect('search and the one rule of active', (dialect) => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore(dialect);
  });
  after(() => t.close());

  // Search reads the rule from the agent's rows joined by address; the Almanac's resolution
  // and the agent's own status read it from correlated subqueries. Every agent below, in every
  // form its record takes and every state the rule looks at, must read alike in both.
  it('says of every agent, in every state, what the rule says of it', async () => {
    const { almanac, agents, enrolments, search } = t.store.repos;
    const userId = await insertUser(t.store);
    const protocol = digestOf('active');
    const registeredAt = NOW - HOUR;
    const presence = (
      address: string,
      status: string,
      statusAt: number,
      lastSeenAt?: number | null,
    ) => insertPresence(t.store, address, status, statusAt, lastSeenAt);
    const hosted = (address: string, state: string) =>
      insertHostedAgent(t.store, { address, ownerId: userId, state, at: registeredAt });
    const registered = async (address: string, expiresAt: number) => {
      await almanac.upsertRegistrations([
        { ...registration(address, [protocol], registeredAt), expires_at: expiresAt },
      ]);
      await almanac.replaceProtocols(new Map([[address, [protocol]]]), []);
    };
    const enrolled = (address: string) =>
      enrolments.claim({
        address,
        user_id: userId,
        name: address,
        handle: address,
        created_at: registeredAt,
      });
    const endpoints = [{ url: 'http://127.0.0.1:9/submit', weight: 1 }];
    // How its record is kept: by an Almanac registration, by its listing (enrolled, with
    // endpoints), by a listing after its registration expired, or not at all.
    const forms: [string, (address: string) => Promise<unknown>][] = [
      ['registered', (a) => registered(a, NOW + 47 * HOUR)],
      ['self-registered', (a) => enrolled(a)],
      [
        'self-registered, registration expired',
        (a) => registered(a, NOW - 1).then(() => enrolled(a)),
      ],
      ['listed, not enrolled', async () => {}],
    ];
    const states: [string, (address: string) => Promise<unknown>][] = [
      ['nothing else', async () => {}],
      ['stopped by a signed status', (a) => almanac.upsertStatus(stopped(a, registeredAt + 1))],
      ['gone since registering', (a) => presence(a, 'offline', registeredAt + 1)],
      ['gone before registering', (a) => presence(a, 'offline', registeredAt - 1)],
      ['gone in its own millisecond', (a) => presence(a, 'offline', registeredAt)],
      ['unreachable since registering', (a) => presence(a, 'unreachable', registeredAt + 1)],
      ['seen working', (a) => presence(a, 'active', registeredAt + 1)],
      ['unreachable, never seen', (a) => presence(a, 'unreachable', registeredAt + 1, null)],
      ['hosted and running', (a) => hosted(a, 'running')],
      ['hosted and stopped', (a) => hosted(a, 'stopped')],
    ];
    const named = new Map<string, string>();
    let n = 0;
    for (const [form, keep] of forms) {
      for (const [state, arrange] of states) {
        const address = `agent1rule${String(n++).padStart(4, '0')}`;
        named.set(address, `${form}, ${state}`);
        await agents.save(
          agentListing({
            address,
            user_id: userId,
            endpoints: form === 'registered' ? [] : endpoints,
            protocols: [protocol],
            registered_at: registeredAt,
            updated_at: registeredAt,
          }),
        );
        await keep(address);
        await arrange(address);
      }
    }
    const addresses = [...named.keys()];
    for (const at of [NOW, NOW + 48 * HOUR]) {
      const expected = new Map<string, number>();
      const gone = new Map<string, number>();
      for (const address of addresses) {
        expected.set(address, (await almanac.activeAt(address, at)) ? 1 : 0);
        const { rows } = await sql<{ gone: number | boolean }>`select case when ${presenceGoneSince(
          sql`${address}`,
          at,
        )} then 1 else 0 end as gone`.execute(t.store.db);
        gone.set(address, Number(rows[0]!.gone));
      }
      // The rule's answers are not all the same (else this test could not fail).
      assert.deepEqual(new Set(expected.values()), new Set([0, 1]));
      const when = at === NOW ? 'now' : 'once registrations expired';

      const registry = (states: SearchState[] = []) =>
        search.searchAgents({
          now: at,
          recentSince: at - HOUR,
          probesSince: at - HOUR,
          states,
          types: [],
          protocols: [],
          tags: [],
          hasReadme: false,
          sort: 'relevancy',
          direction: 'asc',
          offset: 0,
          limit: 1000,
        });
      const listed = await registry();
      // The state filters read the rule where the page's rows are chosen.
      const where = (map: Map<string, number>, value: number) =>
        addresses.filter((address) => map.get(address) === value);
      const filtered = async (states: SearchState[]) =>
        (await registry(states)).rows.map((row) => row.address).filter((a) => named.has(a));
      assert.deepEqual(await filtered(['active']), where(expected, 1), `active, ${when}`);
      assert.deepEqual(await filtered(['inactive']), where(expected, 0), `inactive, ${when}`);
      assert.deepEqual(await filtered(['unresponsive']), where(gone, 1), `unresponsive, ${when}`);
      const byRegistry = new Map(listed.rows.map((row) => [row.address, row]));
      for (const address of addresses) {
        const row = byRegistry.get(address);
        assert.ok(row, `${named.get(address)}: listed`);
        const name = `${named.get(address)}, ${when}`;
        assert.equal(row.status, expected.get(address) ? 'active' : 'inactive', name);
        assert.equal(row.unresponsive, gone.get(address), name);
        assert.equal(row.type, named.get(address)!.includes('hosted') ? 'hosted' : 'local', name);
      }

      const broadcast = await search.almanacByProtocol(protocol, at, LIFETIME, PAGE);
      const recent = await search.almanacRecent(at, LIFETIME, 1000);
      for (const [reading, rows] of [
        ['by protocol', broadcast],
        ['recent', recent],
      ] as const) {
        const found = rows.filter((row) => named.has(row.address));
        assert.ok(found.length >= states.length, `${reading}, ${when}: ${found.length} found`);
        // An agent whose registration expired is answered by its listing alone.
        assert.equal(
          new Set(found.map((row) => row.address)).size,
          found.length,
          `${reading}, ${when}: each agent once`,
        );
        for (const row of found) {
          const name = `${named.get(row.address)}, ${when}, ${reading}`;
          assert.equal(row.active, expected.get(row.address), name);
        }
      }
    }
  });
});
