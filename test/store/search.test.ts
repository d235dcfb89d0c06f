import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect, type CompiledQuery } from 'kysely';
import { sqlitePath } from '../../src/store/database.js';
import type { AlmanacRegistrationRow } from '../../src/store/repositories/almanac.js';
import { SearchRepository } from '../../src/store/repositories/search.js';
import type { Database } from '../../src/store/schema.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { openTestStore, type TestStore } from '../kit/store.js';

const NOW = Date.UTC(2031, 0, 1);
const LIFETIME = 48 * 3600 * 1000;
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
        plan.some((step) => /^SCAN r USING INDEX almanac_registrations_updated_at/.test(step)),
        plan.join('\n'),
      );
      assert.ok(!plan.some((step) => /^SCAN a\b/.test(step)), plan.join('\n'));
    },
  );
});
