import { CryptoFormatError } from './errors.js';

/** Python's `separators=(item, key)`: what goes between members and after each key. */
export type PythonJsonSeparators = readonly [item: string, key: string];

/** `separators=(",", ":")`, as uAgents signs Almanac registrations. */
export const COMPACT_SEPARATORS: PythonJsonSeparators = [',', ':'];
/** Python's default without indent, `(", ", ": ")`, as uAgents hashes protocol manifests. */
export const DEFAULT_SEPARATORS: PythonJsonSeparators = [', ', ': '];

/**
 * Python's `json.dumps(value, sort_keys=True, separators=separators)` with its default
 * `ensure_ascii=True`, byte for byte: the text uAgents signs for Almanac registrations
 * (compact separators, the default here) and hashes for protocol manifests.
 *
 * Accepts what JSON.parse produces. One difference cannot be recovered: Python prints a float
 * with an integral value as `1.0`, but after JSON.parse `1.0` and `1` are the same number, so
 * integral numbers are printed as integers (which is what the signed models contain).
 * Integers beyond 2⁵³ have already lost digits and are refused.
 */
export function pythonJsonDumps(
  value: unknown,
  separators: PythonJsonSeparators = COMPACT_SEPARATORS,
): string {
  const [item, key] = separators;
  const dump = (member: unknown): string => pythonJsonDumps(member, separators);
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      return pythonNumber(value);
    case 'string':
      return pythonString(value);
    case 'object':
      if (Array.isArray(value)) return `[${value.map(dump).join(item)}]`;
      if (isPlainObject(value)) {
        const members = Object.keys(value)
          .sort(compareCodePoints)
          .map((name) => `${pythonString(name)}${key}${dump(value[name])}`);
        return `{${members.join(item)}}`;
      }
  }
  throw new CryptoFormatError(`cannot represent ${Object.prototype.toString.call(value)} as JSON`);
}

function isPlainObject(value: object): value is Record<string, unknown> {
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

/**
 * Python orders strings by code point; JS's default sort compares UTF-16 code units instead.
 * A comparator for `Array.prototype.sort`.
 */
export function compareCodePoints(a: string, b: string): number {
  for (let index = 0; ;) {
    const left = a.codePointAt(index);
    const right = b.codePointAt(index);
    if (left === undefined || right === undefined) return a.length - b.length;
    if (left !== right) return left - right;
    index += left > 0xffff ? 2 : 1;
  }
}

function pythonNumber(value: number): string {
  if (Number.isInteger(value)) {
    if (!Number.isSafeInteger(value)) {
      throw new CryptoFormatError(`integer ${value} is beyond 2^53 and no longer exact`);
    }
    return String(value);
  }
  if (!Number.isFinite(value)) {
    throw new CryptoFormatError(`cannot represent ${value} as JSON`);
  }
  return pythonFloatRepr(value);
}

/**
 * Python's `repr(float)`: the same shortest round-trip digits as JS, but scientific notation
 * below 1e-4 (JS waits until 1e-7) with a signed exponent of at least two digits (`1e-05`).
 * Non-integral doubles are all below 2⁵³, so the large-exponent case never arises here.
 */
function pythonFloatRepr(value: number): string {
  const exponential = value.toExponential();
  const separator = exponential.indexOf('e');
  const exponent = Number(exponential.slice(separator + 1));
  if (exponent >= -4) return String(value);
  return `${exponential.slice(0, separator)}e-${String(-exponent).padStart(2, '0')}`;
}

const SHORT_ESCAPES: Readonly<Record<string, string>> = {
  '"': '\\"',
  '\\': '\\\\',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\b': '\\b',
  '\f': '\\f',
};

/**
 * Python's ensure_ascii escapes everything outside space…tilde. Without the `u` flag the
 * pattern sees UTF-16 code units, so an astral character becomes a surrogate pair, as in Python.
 */
const NEEDS_ESCAPE = /["\\]|[^ -~]/g;

function pythonString(value: string): string {
  const escaped = value.replace(
    NEEDS_ESCAPE,
    (unit) => SHORT_ESCAPES[unit] ?? `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return `"${escaped}"`;
}
