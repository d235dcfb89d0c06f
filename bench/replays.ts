import { randomUUID } from 'node:crypto';
import type { DialectName } from '../src/store/index.js';
import { benchStores } from './lib/databases.js';
import { medianMicros, openMailboxBench } from './lib/mailbox-store.js';

/**
 * `npx tsx bench/replays.ts`: what keeping the uuids of deleted messages (replays) costs a
 * submit. Per group commit of 16 envelopes, the read that finds uuids already taken is timed
 * with the replays table (on) and without it (off), alternately in the same run, next to the
 * group's insert; medians of 1,500 groups over 10,000 stored messages and 10,000 replays.
 */

const GROUP = 16;
const GROUPS = 1_500;
const SEED = 10_000;

async function measure(dialect: DialectName): Promise<string> {
  const { store, message, close } = await openMailboxBench(dialect);
  try {
    for (let i = 0; i < SEED; i += 500) {
      await store.repos.mailbox.deliver(Array.from({ length: 500 }, message), '2026-11-15');
      await store.db
        .insertInto('replays')
        .values(Array.from({ length: 500 }, () => ({ uuid: randomUUID(), expires_at: Date.now() })))
        .execute();
    }
    const variants = {
      off: (uuids: string[]) =>
        store.db.selectFrom('messages').select('uuid').where('uuid', 'in', uuids).execute(),
      on: (uuids: string[]) => store.repos.mailbox.existing(uuids),
    };
    const samples = { off: [] as number[], on: [] as number[], deliver: [] as number[] };
    for (let i = 0; i < GROUPS; i++) {
      const group = Array.from({ length: GROUP }, message);
      const uuids = group.map((m) => m.uuid);
      for (const name of i % 2 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
        const started = performance.now();
        await variants[name](uuids);
        samples[name].push(performance.now() - started);
      }
      const started = performance.now();
      await store.repos.mailbox.deliver(group, '2026-11-15');
      samples.deliver.push(performance.now() - started);
    }
    const [off, on, deliver] = [
      medianMicros(samples.off),
      medianMicros(samples.on),
      medianMicros(samples.deliver),
    ];
    return `${dialect}: per group of ${GROUP}, uuid read off ${off.toFixed(0)} µs, on ${on.toFixed(0)} µs (+${(on - off).toFixed(0)} µs, ${((on - off) / GROUP).toFixed(1)} µs per envelope); insert ${deliver.toFixed(0)} µs; +${(((on - off) / (off + deliver)) * 100).toFixed(1)} % of read and insert`;
  } finally {
    await close();
  }
}

const { dialects, skipped } = await benchStores();
if (skipped) console.log(`skipping ${skipped}`);
for (const dialect of dialects) console.log(await measure(dialect));
