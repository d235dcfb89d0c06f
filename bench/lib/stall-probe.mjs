/**
 * Loaded into `agentry serve` with `--import` by bench/stalls.ts: notes, on the wall clock
 * shared by every process of the machine (`performance.timeOrigin + performance.now()`), each
 * stretch of over 2 ms in which the event loop ran no timer, each garbage collection, and
 * each better-sqlite3 statement that ran over 3 ms (with its first 60 characters), and writes
 * them as JSON to the file `BENCH_STALL_PROBE_FILE` every second and at exit. On PostgreSQL
 * no statement runs on the event loop, and none is noted.
 */
import { writeFileSync } from 'node:fs';
import { PerformanceObserver } from 'node:perf_hooks';
import { timeStatements } from './statement-hook.mjs';

const file = process.env.BENCH_STALL_PROBE_FILE;
if (file === undefined) throw new Error('BENCH_STALL_PROBE_FILE names no file');

const wall = (at) => performance.timeOrigin + at;
const noted = { stalls: [], collections: [], statements: [] };

let last = performance.now();
setInterval(() => {
  const now = performance.now();
  if (now - last > 2) noted.stalls.push([wall(last), now - last]);
  last = now;
}, 1).unref();

new PerformanceObserver((list) => {
  for (const entry of list.getEntries())
    noted.collections.push([wall(entry.startTime), entry.duration]);
}).observe({ entryTypes: ['gc'] });

timeStatements((source, began, took) => {
  if (took > 3) noted.statements.push([wall(began), took, source.slice(0, 60)]);
});

const write = () => writeFileSync(file, JSON.stringify(noted));
setInterval(write, 1000).unref();
process.on('exit', write);
