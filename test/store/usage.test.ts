import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { periodEnd, usagePeriod } from '../../src/services/usage.js';
import { CompiledStatements } from '../../src/store/compiled.js';
import { addUsage } from '../../src/store/repositories/usage.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { insertUser, openTestStore, type TestStore } from '../kit/store.js';

describe('usage periods', () => {
  it('names the UTC calendar month and ends it at the next month', () => {
    const ms = Date.UTC(2026, 11, 31, 23, 59, 59);
    assert.equal(usagePeriod(ms), '2026-12');
    assert.equal(new Date(periodEnd(ms)).toISOString(), '2027-01-01T00:00:00.000Z');
  });
});

describeOnEachDialect('usage store', (dialect) => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore(dialect);
  });
  after(() => t.close());

  it('starts a period at zero and adds to it, also concurrently', async () => {
    const userId = await insertUser(t.store);
    assert.deepEqual(await t.store.repos.usage.period(userId, '2026-11'), {
      num_messages: 0,
      bytes_transferred: 0,
    });
    await Promise.all(
      Array.from({ length: 10 }, () =>
        addUsage(t.store.db, new CompiledStatements(), userId, '2026-11', {
          num_messages: 1,
          bytes_transferred: 100,
        }),
      ),
    );
    assert.deepEqual(await t.store.repos.usage.period(userId, '2026-11'), {
      num_messages: 10,
      bytes_transferred: 1000,
    });
    assert.equal((await t.store.repos.usage.period(userId, '2026-12')).num_messages, 0);
  });

  it('adds transfers to the period, also concurrently, and leaves the session as it was', async () => {
    const userId = await insertUser(t.store);
    await addUsage(t.store.db, new CompiledStatements(), userId, '2026-10', { num_messages: 3 });
    await Promise.all(
      Array.from({ length: 10 }, () => t.store.repos.mailbox.countTransfer(userId, '2026-10', 70)),
    );
    await t.store.repos.mailbox.countTransfer(userId, '2026-09', 5);
    assert.deepEqual(await t.store.repos.usage.period(userId, '2026-10'), {
      num_messages: 3,
      bytes_transferred: 700,
    });
    assert.equal((await t.store.repos.usage.period(userId, '2026-09')).bytes_transferred, 5);
    if (dialect === 'postgres') {
      // Every connection of the pool ran one of them: none kept the relaxed commit.
      const settings = await Promise.all(
        Array.from({ length: 10 }, () =>
          sql<{ synchronous_commit: string }>`show synchronous_commit`.execute(t.store.db),
        ),
      );
      for (const { rows } of settings) assert.equal(rows[0]!.synchronous_commit, 'on');
    }
  });

  it('sets quota overrides one at a time and keeps the others', async () => {
    const userId = await insertUser(t.store);
    assert.equal(await t.store.repos.usage.findOverrides(userId), undefined);
    await t.store.repos.usage.setOverrides(userId, { agents: 5 });
    await t.store.repos.usage.setOverrides(userId, { bytes_stored: 1000 });
    const o = await t.store.repos.usage.findOverrides(userId);
    assert.equal(o?.agents, 5);
    assert.equal(o?.bytes_stored, 1000);
    assert.equal(o?.messages_per_month, null);
  });

  it('totals zero for a user without agents', async () => {
    const userId = await insertUser(t.store);
    assert.deepEqual(await t.store.repos.usage.totals(userId), {
      num_agents: 0,
      bytes_stored: 0,
    });
  });
});
