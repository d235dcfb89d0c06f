import { loadavg } from 'node:os';
import { processCpuSeconds } from './proc.js';
import type { Measure } from './report.js';
import type { RunningService } from './server.js';
import { summarize, type LatencySummary } from './stats.js';

/**
 * Two or more ways of asking the same thing of one server, measured interleaved (every client
 * asks each way in turn, which goes first rotating) so that all meet the same load at the same
 * moments and their difference is measured within one run.
 */

/** One way of asking, given the index of the request (the same index asks the same thing). */
export type Side = (index: number) => Promise<void>;

/**
 * A closed loop of `clients` clients, each asking every side in turn (which side goes first
 * rotating), `perSide` rounds in all, request indices from `first`: every side meets the same
 * server at the same moments. Answers each side's latencies (ms).
 */
export async function interleaved(
  sides: Side[],
  perSide: number,
  clients: number,
  first = 0,
): Promise<number[][]> {
  const samples = sides.map(() => [] as number[]);
  let next = 0;
  const client = async (c: number): Promise<void> => {
    for (let round = next++; round < perSide; round = next++) {
      for (let k = 0; k < sides.length; k++) {
        const s = (round + c + k) % sides.length;
        const started = performance.now();
        await sides[s]!(first + round);
        samples[s]!.push(performance.now() - started);
      }
    }
  };
  await Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
  return samples;
}

/**
 * The server's CPU per request of each side (ms): each side alone in a closed loop of
 * `clients`, `count` requests in two runs, the sides' order reversed for the second, so that
 * a drift in the machine's pace weighs on all alike.
 */
export async function cpuPerRequest(
  pid: number,
  sides: Side[],
  count: number,
  clients: number,
  first: number,
): Promise<number[]> {
  const seconds = sides.map(() => 0);
  const half = Math.ceil(count / 2);
  const order = sides.map((_, s) => s);
  for (const pass of [order, [...order].reverse()]) {
    for (const s of pass) {
      const before = processCpuSeconds(pid);
      await interleaved([sides[s]!], half, clients, first);
      seconds[s]! += processCpuSeconds(pid) - before;
    }
  }
  return seconds.map((cpu) => (cpu * 1000) / (2 * half));
}

/** A summary's p50 and p99. */
export const latencyParts = (summary: LatencySummary) => ({ p50: summary.p50, p99: summary.p99 });

/** Sides measured together: each one's latencies, with what the server did meanwhile. */
export interface Compared {
  /** Id and label of each side, the one compared against first. */
  sides: { key: string; label: string }[];
  samples: number[][];
  /** The server's CPU per request of each side (ms), when measured. */
  cpuMs?: number[];
  serverCores: number;
  clients: number;
  loadAverage: number;
}

/** Which difference of two sides to report, and the goal set for it. */
export interface Difference {
  /** The index of the side measured, and of the side it is compared against. */
  side: number;
  against: number;
  label: string;
  goalMs: number;
  goal: ('p50' | 'p99')[];
  /** The difference measures' ids are `${id}.${key}_p50` and `…_p99`. */
  key?: string;
}

/**
 * A measure for each side (its p99, with its p50), and two for the difference of two sides
 * (`difference.side` − `difference.against`): of their p50s and of their p99s.
 */
export function comparedMeasures(
  id: string,
  dialect: Measure['store'],
  run: Compared,
  difference: Difference,
): Measure[] {
  const summaries = run.samples.map((samples) => summarize(samples));
  const sideMeasures = run.sides.map((side, s): Measure => ({
    id: `${id}.${side.key}`,
    label: side.label,
    store: dialect,
    value: summaries[s]!.p99,
    unit: 'ms p99',
    latencyMs: latencyParts(summaries[s]!),
    serverCores: run.serverCores,
    details: {
      requests: summaries[s]!.count,
      max: summaries[s]!.max,
      mean: summaries[s]!.mean,
      clients: run.clients,
      ...(run.cpuMs && { serverCpuMsPerRequest: run.cpuMs[s] }),
      loadAverage: run.loadAverage,
    },
  }));
  const measured = summaries[difference.side]!;
  const against = summaries[difference.against]!;
  const derivedFrom = [
    `${id}.${run.sides[difference.side]!.key}`,
    `${id}.${run.sides[difference.against]!.key}`,
  ];
  const differences = (['p50', 'p99'] as const).map((p): Measure => ({
    id: `${id}.${difference.key ?? 'difference'}_${p}`,
    label: `${difference.label}, ${p}${difference.goal.includes(p) ? ` (goal < ${difference.goalMs} ms)` : ''}`,
    store: dialect,
    value: measured[p] - against[p],
    unit: `ms ${p}`,
    details: {
      ...(difference.goal.includes(p) && { goalMs: difference.goalMs }),
      ...(run.cpuMs && {
        serverCpuMsPerRequestDifference:
          run.cpuMs[difference.side]! - run.cpuMs[difference.against]!,
      }),
      derivedFrom,
    },
  }));
  return [...sideMeasures, ...differences];
}

/**
 * Measures `sides` interleaved after a warm-up (request indices from 0, then from
 * `counts.warmup`), then, when `counts.cpu` is given, the server's CPU per request of each
 * (indices from `counts.warmup + counts.measured`).
 */
export async function compare(
  service: RunningService,
  sides: { key: string; label: string; run: Side }[],
  counts: { warmup: number; measured: number; cpu?: number; clients: number },
): Promise<Compared> {
  const runs = sides.map((side) => side.run);
  await interleaved(runs, counts.warmup, counts.clients);
  const cpuBefore = processCpuSeconds(service.pid);
  const started = performance.now();
  const samples = await interleaved(runs, counts.measured, counts.clients, counts.warmup);
  const seconds = (performance.now() - started) / 1000;
  const serverCores = (processCpuSeconds(service.pid) - cpuBefore) / seconds;
  const loadAverage = loadavg()[0]!;
  const cpuMs =
    counts.cpu === undefined
      ? undefined
      : await cpuPerRequest(
          service.pid,
          runs,
          counts.cpu,
          counts.clients,
          counts.warmup + counts.measured,
        );
  return {
    sides,
    samples,
    ...(cpuMs && { cpuMs }),
    serverCores,
    clients: counts.clients,
    loadAverage,
  };
}
