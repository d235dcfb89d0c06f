import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, platform, release, totalmem } from 'node:os';
import { dirname } from 'node:path';
import type { DialectName } from '../../src/store/index.js';
import type { LoadResult } from './load.js';

/** One number the benchmark reports. */
export interface Measure {
  /** Stable key for comparing runs, e.g. "ceiling.http" or "identity.proof". */
  id: string;
  label: string;
  /** The store the server ran on, for measures that involve one. */
  store?: DialectName;
  value: number;
  unit: string;
  /**
   * Whether a larger value is the better one, where the unit does not say: by default only
   * rates (a unit per second) are; times, sizes and ratios are better smaller. A ratio of two
   * rates, such as throughput with ÷ without a load, says it here.
   */
  higherIsBetter?: boolean;
  latencyMs?: { p50: number; p99: number };
  /** CPU the server under test used over the run, in cores (1 = one core all the time). */
  serverCores?: number;
  /** The ceiling this measure is compared to, and value ÷ ceiling. */
  ceiling?: { id: string; value: number; ratio: number };
  /** How it was measured: counts, CPU used, settings. */
  details?: Record<string, unknown>;
}

/**
 * The measure of a load run: requests per second with latency percentiles, compared with
 * `ceiling` when one applies (the same store's, where it depends on the store).
 */
export function throughputMeasure(
  what: Pick<Measure, 'id' | 'label' | 'store'>,
  run: LoadResult,
  ceiling?: Measure,
): Measure {
  return {
    ...what,
    value: run.requestsPerSecond,
    unit: 'req/s',
    latencyMs: { p50: run.latencyMs.p50, p99: run.latencyMs.p99 },
    serverCores: run.serverCores,
    ...(ceiling
      ? {
          ceiling: {
            id: ceiling.id,
            value: ceiling.value,
            ratio: run.requestsPerSecond / ceiling.value,
          },
        }
      : {}),
    details: {
      requests: run.requests,
      seconds: run.seconds,
      loadGeneratorCores: run.loadGeneratorCores,
    },
  };
}

export interface MachineInfo {
  cpuModel: string;
  cores: number;
  memoryBytes: number;
  os: string;
  node: string;
}

export function machineInfo(): MachineInfo {
  return {
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    cores: availableParallelism(),
    memoryBytes: totalmem(),
    os: `${platform()} ${release()}`,
    node: process.version,
  };
}

export interface BenchResults {
  date: string;
  seconds: number;
  machine: MachineInfo;
  /** Settings that shape the numbers: load generator and profile, server command, stores. */
  setup: Record<string, unknown>;
  /** Why parts of the benchmark did not run. */
  skipped: string[];
  measures: Measure[];
}

/** Writes a run's results (a {@link BenchResults}, or a compare's) as indented JSON. */
export function writeResults(path: string, results: object): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, JSON.stringify(results, null, 2) + '\n');
}

/** A number as the tables show it: whole with thousands separators from 100, else 3 digits. */
export function formatNumber(value: number): string {
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString('en-US');
  return value.toPrecision(3);
}

/**
 * Rows as a Markdown table, the columns of `numeric` right-aligned: readable in a terminal,
 * and pasted as is into the docs (the separator row is as Prettier writes it).
 */
export function markdownTable(header: string[], rows: string[][], numeric: Set<number>): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => row[column]!.length)),
  );
  const line = (cells: string[]): string =>
    `| ${cells.map((cell, i) => (numeric.has(i) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join(' | ')} |`;
  const rule = `| ${widths.map((width, i) => (numeric.has(i) ? `${'-'.repeat(width - 1)}:` : '-'.repeat(width))).join(' | ')} |`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

/** The measures as a Markdown table: readable in a terminal, pasted as is into the README. */
export function formatTable(measures: Measure[]): string {
  const header = [
    'measure',
    'store',
    'value',
    'unit',
    'p50 ms',
    'p99 ms',
    'server CPU',
    'of ceiling',
  ];
  const rows = measures.map((m) => [
    m.label,
    m.store ?? '',
    formatNumber(m.value),
    m.unit,
    m.latencyMs ? formatNumber(m.latencyMs.p50) : '',
    m.latencyMs ? formatNumber(m.latencyMs.p99) : '',
    m.serverCores === undefined ? '' : `${m.serverCores.toFixed(2)} cores`,
    m.ceiling ? `${(m.ceiling.ratio * 100).toFixed(0)} %` : '',
  ]);
  return markdownTable(header, rows, new Set([2, 4, 5, 6, 7]));
}
