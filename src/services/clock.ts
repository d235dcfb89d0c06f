/** The source of "now" for every rule that depends on time; tests pass their own. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * A moment as Python's `datetime.isoformat()` prints an aware UTC datetime with microseconds,
 * `2026-11-21T10:00:00.123000+00:00`: what clients parse with `datetime.fromisoformat`, which
 * before Python 3.11 rejects a trailing `Z`.
 */
export function pythonIsoformat(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, -1)}000+00:00`;
}
