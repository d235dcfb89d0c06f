import { mainThreadWaitingSeconds } from './proc.js';

export interface RepeatResult {
  calls: number;
  /** Calls per second of the thread's own time: running, or blocked in the kernel on I/O. */
  perCore: number;
  /** Share of the wall time the thread waited for a CPU other processes held. */
  preempted: number;
}

/**
 * Repeats the synchronous `work` on this thread for `seconds` of wall time. The rate leaves
 * out the time the scheduler gave the core to other processes but keeps time blocked on
 * I/O, which a synchronous call (a SQLite commit) makes the event loop pay.
 */
export function repeatFor(seconds: number, work: () => void): RepeatResult {
  const waitedBefore = mainThreadWaitingSeconds();
  const start = performance.now();
  const end = start + seconds * 1000;
  let calls = 0;
  let now = start;
  while (now < end) {
    // Reading the clock costs as much as a small call: look at it every 64 calls.
    for (let i = 0; i < 64; i++) work();
    calls += 64;
    now = performance.now();
  }
  const wallSeconds = (now - start) / 1000;
  const waitedSeconds = mainThreadWaitingSeconds() - waitedBefore;
  return {
    calls,
    perCore: calls / (wallSeconds - waitedSeconds),
    preempted: waitedSeconds / wallSeconds,
  };
}

/** The middle one of `results` by `rate` (the upper middle for an even count). */
export function medianBy<T>(results: T[], rate: (result: T) => number): T {
  if (results.length === 0) throw new RangeError('median of no results');
  return [...results].sort((a, b) => rate(a) - rate(b))[Math.floor(results.length / 2)]!;
}

/** Short measuring rounds of which the median counts. */
export interface Rounds {
  count: number;
  seconds: number;
}

/**
 * `repeatFor` in short rounds, keeping the median round: a burst of other work on
 * the machine spoils one round, not the measure.
 */
export function medianRepeat(
  rounds: Rounds,
  work: () => void,
): RepeatResult & { roundRates: number[] } {
  const results = Array.from({ length: rounds.count }, () => repeatFor(rounds.seconds, work));
  return {
    ...medianBy(results, (result) => result.perCore),
    roundRates: results.map((result) => result.perCore),
  };
}
