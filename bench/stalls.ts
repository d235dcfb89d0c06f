/**
 * `npx tsx bench/stalls.ts [sqlite|postgres] [--rounds N]`: where the slowest 1 % of the Almanac
 * scenario's registrations at a steady 1,000 a second come from. Each round starts `agentry
 * serve` (built as `npm start` does) over a fresh database with bench/lib/stall-probe.mjs
 * loaded, registers as the scenario does (`registerAsTheScenarioDoes`), and times every paced
 * registration on the wall clock the server's probe uses. This process watches its own event
 * loop the same way. The report says, of the slowest 1 %, how many were in flight while the
 * server's event loop stood still for 5 ms or more, while this process's did, and while one of
 * the server's SQLite statements ran that long; then the statements over 3 ms (by text: how
 * many, how long, how far apart), the server's longest stalls and its collections over 2 ms. A
 * diagnostic, not a measure of the bench: the probe costs the server a timer a millisecond.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { freshDatabase } from './lib/databases.js';
import { buildService, startService } from './lib/server.js';
import { median, percentile } from './lib/stats.js';
import { registerAsTheScenarioDoes } from './scenarios/almanac.js';

const { values: options, positionals } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: 'string', default: '1' } },
});
const STORE = positionals[0] === 'postgres' ? 'postgres' : 'sqlite';
const ROUNDS = Number(options.rounds);

/** A stretch of time on the wall clock: when it began (ms), how long it lasted (ms). */
type Span = [at: number, ms: number];
/** What the probe noted in the server (bench/lib/stall-probe.mjs). */
interface Probed {
  stalls: Span[];
  collections: Span[];
  statements: [at: number, ms: number, text: string][];
}

const wall = (at: number) => performance.timeOrigin + at;

/**
 * This process's own event-loop stalls over 2 ms and its collections, noted as the probe notes
 * the server's.
 */
function watchThisProcess(): { stalls: Span[]; collections: Span[]; stop(): void } {
  const stalls: Span[] = [];
  const collections: Span[] = [];
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    if (now - last > 2) stalls.push([wall(last), now - last]);
    last = now;
  }, 1);
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries())
      collections.push([wall(entry.startTime), entry.duration]);
  });
  observer.observe({ entryTypes: ['gc'] });
  return {
    stalls,
    collections,
    stop: () => {
      clearInterval(timer);
      observer.disconnect();
    },
  };
}

/** Whether one of `spans` of 5 ms or more fell while a request sent at `at` waited `ms`. */
const overlaps = (spans: readonly (readonly [number, number, ...unknown[]])[], [at, ms]: Span) =>
  spans.some(([from, length]) => length >= 5 && from < at + ms && from + length > at);
const round1 = (n: number) => Math.round(n * 10) / 10;

async function round(index: number): Promise<void> {
  const directory = mkdtempSync(join(tmpdir(), 'agentry-stalls-'));
  const probeFile = join(directory, 'probe.json');
  process.env.BENCH_STALL_PROBE_FILE = probeFile;
  const database = await freshDatabase(STORE);
  const probe = new URL('./lib/stall-probe.mjs', import.meta.url).href;
  const service = await startService(database, {}, ['--import', probe]);
  const own = watchThisProcess();
  const answers: Span[] = [];
  try {
    await registerAsTheScenarioDoes(service, (_, { sentAt, ms }) =>
      answers.push([wall(sentAt), ms]),
    );
  } finally {
    own.stop();
    await service.stop();
    await database.drop();
  }
  const probed = JSON.parse(readFileSync(probeFile, 'utf8')) as Probed;
  rmSync(directory, { recursive: true, force: true });

  const from = Math.min(...answers.map(([at]) => at));
  const to = Math.max(...answers.map(([at, ms]) => at + ms));
  const during = <T extends [number, ...unknown[]]>(spans: T[]) =>
    spans.filter(([at]) => at >= from && at <= to);
  const latencies = Float64Array.from(answers.map(([, ms]) => ms)).sort();
  const p99 = percentile(latencies, 99);
  const slowest = answers.filter(([, ms]) => ms >= p99);
  const statements = during(probed.statements);
  const serverStalls = during(probed.stalls);
  const relative = ([at, ms]: Span) => `${Math.round(at - from)}: ${round1(ms)} ms`;

  console.log(`\nround ${index} (${STORE}): ${answers.length} registrations at 1,000/s`);
  console.log(`  p50 ${round1(median(latencies))} ms, p99 ${round1(p99)} ms`);
  const caught = (spans: Parameters<typeof overlaps>[0]) =>
    slowest.filter((request) => overlaps(spans, request)).length;
  console.log(`  of the slowest ${slowest.length}, in flight while for 5 ms or more`);
  console.log(`    the server's event loop stood still:  ${caught(serverStalls)}`);
  console.log(`    this process's event loop stood still: ${caught(during(own.stalls))}`);
  console.log(`    a server statement ran:                ${caught(statements)}`);
  const byText = new Map<string, Span[]>();
  for (const [at, ms, text] of statements) {
    const spans = byText.get(text) ?? [];
    spans.push([at, ms]);
    byText.set(text, spans);
  }
  for (const [text, spans] of byText) {
    const gaps = spans.slice(1).map(([at], i) => at - spans[i]![0]);
    const ms = Float64Array.from(spans.map(([, took]) => took)).sort();
    console.log(
      `  statements over 3 ms: ${spans.length} × ${text} (median ${round1(median(ms))} ms` +
        (gaps.length > 0
          ? `, every ${Math.round(median(Float64Array.from(gaps).sort()))} ms)`
          : ')'),
    );
  }
  const longest = [...serverStalls].sort((a, b) => b[1] - a[1]).slice(0, 8);
  console.log(
    `  the server's longest stalls (ms from the first paced request): ${longest.map(relative).join(', ')}`,
  );
  const listed = (spans: Span[]) =>
    spans
      .filter(([, ms]) => ms > 2)
      .map(relative)
      .join(', ') || 'none';
  console.log(`  the server's collections over 2 ms: ${listed(during(probed.collections))}`);
  console.log(`  this process's collections over 2 ms: ${listed(during(own.collections))}`);
}

await buildService();
for (let index = 1; index <= ROUNDS; index++) await round(index);
