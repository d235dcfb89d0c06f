/**
 * A moment as clients read it: ISO-8601 in UTC with an explicit `+00:00` offset and six
 * fractional digits, as Python's `datetime.isoformat()` writes it. Older Python's
 * `fromisoformat` rejects a trailing `Z`, and some accept only three or six digits.
 */
export function isoTimestamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000+00:00');
}
