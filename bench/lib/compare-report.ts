import { formatNumber, markdownTable, type Measure } from './report.js';
import { median } from './stats.js';

/**
 * The side-by-side figures of `npm run bench -- --compare`: each measure of each round on the
 * two builds, reduced to one row per figure with both medians, their ratio and whether the
 * difference stands out of the rounds' own spread.
 */

/** One figure of one measure, read off a {@link Measure}. */
interface Figure {
  suffix: string;
  label: string;
  unit: string;
  higherIsBetter: boolean;
  read(measure: Measure): number | undefined;
}

/** Throughput units ("req/s", "checks/s/core") grow with speed; times, sizes and ratios shrink. */
function higherIsBetter(unit: string): boolean {
  return /\/s(\/|$)/.test(unit);
}

/** The figures a measure yields: its value, per CPU-second of the server, and its p99. */
function figuresOf(measure: Measure): Figure[] {
  const figures: Figure[] = [
    {
      suffix: '',
      label: measure.label,
      unit: measure.unit,
      higherIsBetter: measure.higherIsBetter ?? higherIsBetter(measure.unit),
      read: (m) => m.value,
    },
  ];
  if (measure.serverCores !== undefined && higherIsBetter(measure.unit)) {
    figures.push({
      suffix: '.per_cpu_second',
      label: `${measure.label}, per server CPU-second`,
      unit: `${measure.unit.replace(/\/s$/, '')}/CPU-s`,
      higherIsBetter: true,
      read: (m) => (m.serverCores ? m.value / m.serverCores : undefined),
    });
  }
  if (measure.latencyMs && !measure.unit.startsWith('ms')) {
    figures.push({
      suffix: '.p99',
      label: `${measure.label}, p99`,
      unit: 'ms',
      higherIsBetter: false,
      read: (m) => m.latencyMs?.p99,
    });
  }
  return figures;
}

export interface Spread {
  /** Every round's value, in round order. */
  values: number[];
  median: number;
  min: number;
  max: number;
}

export interface CompareRow {
  /** The measure's id with the figure's suffix, e.g. "mailbox.list.small_store.p99". */
  id: string;
  label: string;
  store?: string;
  unit: string;
  higherIsBetter: boolean;
  base: Spread;
  head: Spread;
  /** head median ÷ base median. */
  ratio: number;
  /** The two builds' ranges over the rounds (two or more each) do not overlap. */
  beyondSpread: boolean;
  /** Whether head is the better of the two, when the difference is beyond the spread. */
  verdict: 'better' | 'worse' | 'same';
}

export function spreadOf(values: number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  return { values, median: median(sorted), min: sorted[0]!, max: sorted[sorted.length - 1]! };
}

/**
 * One row per figure that both builds measured in every round they ran. `base` and `head`
 * hold, for each round, the measures that build returned.
 */
export function compareRows(base: Measure[][], head: Measure[][]): CompareRow[] {
  const key = (measure: Measure): string => `${measure.id}|${measure.store ?? ''}`;
  const byKey = (rounds: Measure[][]): Map<string, Measure[]> => {
    const grouped = new Map<string, Measure[]>();
    for (const round of rounds) {
      for (const measure of round) {
        const list = grouped.get(key(measure)) ?? [];
        list.push(measure);
        grouped.set(key(measure), list);
      }
    }
    return grouped;
  };
  const baseByKey = byKey(base);
  const rows: CompareRow[] = [];
  for (const [measureKey, headMeasures] of byKey(head)) {
    const baseMeasures = baseByKey.get(measureKey);
    if (!baseMeasures) continue;
    for (const figure of figuresOf(headMeasures[0]!)) {
      const values = (measures: Measure[]): number[] =>
        measures.map(figure.read).filter((v): v is number => v !== undefined && isFinite(v));
      const baseValues = values(baseMeasures);
      const headValues = values(headMeasures);
      if (baseValues.length === 0 || headValues.length === 0) continue;
      const b = spreadOf(baseValues);
      const h = spreadOf(headValues);
      // One round has no spread to measure a difference against.
      const beyondSpread =
        b.values.length > 1 && h.values.length > 1 && (h.min > b.max || h.max < b.min);
      const headHigher = h.median > b.median;
      rows.push({
        id: `${headMeasures[0]!.id}${figure.suffix}`,
        label: figure.label,
        store: headMeasures[0]!.store,
        unit: figure.unit,
        higherIsBetter: figure.higherIsBetter,
        base: b,
        head: h,
        ratio: h.median / b.median,
        beyondSpread,
        verdict: !beyondSpread ? 'same' : headHigher === figure.higherIsBetter ? 'better' : 'worse',
      });
    }
  }
  return rows;
}

function formatSpread(spread: Spread): string {
  if (spread.values.length < 2 || spread.median === 0) return formatNumber(spread.median);
  const half = ((spread.max - spread.min) / 2 / spread.median) * 100;
  return `${formatNumber(spread.median)} ±${half.toFixed(0)} %`;
}

/** The rows as a Markdown table; ± is half the range of the rounds, relative to the median. */
export function formatCompareTable(rows: CompareRow[], baseLabel: string, headLabel: string) {
  const header = ['measure', 'store', 'unit', baseLabel, headLabel, 'ratio', 'beyond spread'];
  const cells = rows.map((row) => [
    row.label,
    row.store ?? '',
    row.unit,
    formatSpread(row.base),
    formatSpread(row.head),
    `${row.ratio.toFixed(2)}×`,
    row.verdict === 'same' ? 'no' : `yes, ${row.verdict}`,
  ]);
  return markdownTable(header, cells, new Set([3, 4, 5]));
}
