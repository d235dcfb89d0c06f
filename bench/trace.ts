import { randomBytes } from 'node:crypto';
import type { DialectName } from '../src/store/index.js';
import type { NewMessage } from '../src/store/repositories/mailbox.js';
import { benchStores } from './lib/databases.js';
import { medianMicros, openMailboxBench } from './lib/mailbox-store.js';

/**
 * `npx tsx bench/trace.ts`: what the delivery trace costs a submit. The group insert of the
 * mailbox (messages, counters, usage: the write of every submit) is timed without the trace
 * (off) and with it (on: each message keeps its sender and envelope digest on its row),
 * alternately in the same run, for groups of 1 (a lone submit) and of 16 (a
 * busy server); medians and totals of 1,000 groups each.
 */

const GROUPS = 1_000;
const SIZES = [1, 16];

const total = (samples: number[]): number => samples.reduce((a, b) => a + b, 0);

async function measure(dialect: DialectName): Promise<string[]> {
  const { store, message, close } = await openMailboxBench(dialect);
  try {
    const traced = (m: NewMessage): NewMessage => ({
      ...m,
      sender: `agent1${'s'.repeat(58)}`,
      digest: randomBytes(32).toString('hex'),
    });
    // Warm up both paths.
    for (let i = 0; i < 100; i++) {
      await store.repos.mailbox.deliver([i % 2 ? traced(message()) : message()], '2026-11-15');
    }
    const lines: string[] = [];
    for (const size of SIZES) {
      const samples = { off: [] as number[], on: [] as number[] };
      for (let i = 0; i < GROUPS; i++) {
        for (const name of i % 2 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
          const group = Array.from({ length: size }, () =>
            name === 'on' ? traced(message()) : message(),
          );
          const started = performance.now();
          await store.repos.mailbox.deliver(group, '2026-11-15');
          samples[name].push(performance.now() - started);
        }
      }
      const [off, on] = [medianMicros(samples.off), medianMicros(samples.on)];
      const [offTotal, onTotal] = [total(samples.off), total(samples.on)];
      lines.push(
        `${dialect}: group of ${size}: median off ${off.toFixed(0)} µs, on ${on.toFixed(0)} µs (${(((on - off) / off) * 100).toFixed(1)} %); total ${offTotal.toFixed(0)} → ${onTotal.toFixed(0)} ms (${(((onTotal - offTotal) / offTotal) * 100).toFixed(1)} %)`,
      );
    }
    return lines;
  } finally {
    await close();
  }
}

const { dialects, skipped } = await benchStores();
if (skipped) console.log(`skipping ${skipped}`);
for (const dialect of dialects) for (const line of await measure(dialect)) console.log(line);
