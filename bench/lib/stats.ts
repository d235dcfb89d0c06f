/** Latency summaries computed from every sample, not from a bucketed histogram. */

/**
 * The p-th percentile (0 < p ≤ 100) of ascending `sorted` by the nearest-rank method: the
 * smallest sample that at least p % of the samples do not exceed.
 */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) throw new RangeError('percentile of no samples');
  if (!(p > 0 && p <= 100)) throw new RangeError(`percentile must be in (0, 100], got ${p}`);
  return sorted[Math.ceil((p / 100) * sorted.length) - 1]!;
}

/** The median of ascending `sorted`: its middle sample, or the mean of its two middle ones. */
export function median(sorted: ArrayLike<number>): number {
  if (sorted.length === 0) throw new RangeError('median of no samples');
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export interface LatencySummary {
  count: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
}

export function summarize(samples: ArrayLike<number>): LatencySummary {
  const sorted = Float64Array.from(samples).sort();
  let total = 0;
  for (const sample of sorted) total += sample;
  return {
    count: sorted.length,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1]!,
    mean: total / sorted.length,
  };
}
