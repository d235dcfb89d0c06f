/** The source of "now" for every rule that depends on time; tests pass their own. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * An instant as Python's `datetime.isoformat()` writes an aware UTC datetime with
 * microseconds, e.g. `2026-11-21T10:00:00.123000+00:00`: older Pythons reject a trailing `Z`.
 */
export function isoTimestamp(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, -1)}000+00:00`;
}
