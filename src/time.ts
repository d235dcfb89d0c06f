/**
 * A moment as clients read it: ISO-8601 in UTC with an explicit `+00:00` offset and six
 * fractional digits, as Python's `datetime.isoformat()` writes it. Older Python's
 * `fromisoformat` rejects a trailing `Z`, and some accept only three or six digits.
 */
export function isoTimestamp(ms: number): string {
  // toISOString is always YYYY-MM-DDTHH:MM:SS.sssZ for the years a timestamp here can have;
  // slicing costs half of a regular expression, and a poll formats 200 of these.
  return `${new Date(ms).toISOString().slice(0, 23)}000+00:00`;
}
