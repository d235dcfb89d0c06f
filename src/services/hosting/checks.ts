import { RequestValidationError, type ValidationIssue } from '../../errors.js';
import {
  AGENT_MAIN_FILE,
  MAX_CODE_BYTES,
  MAX_CODE_FILES,
  MAX_FILE_NAME_LENGTH,
  MAX_LOG_ENTRY,
  MAX_SECRET_NAME_LENGTH,
  MAX_STORAGE_KEY_LENGTH,
  type CodeFile,
} from './model.js';

/** What the hosting service checks of what it is given: code, secrets' names, storage keys, text. */

const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const FILE_SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
/** What the runner sets in an agent's environment: a secret may not take its names. */
const RESERVED_SECRET_PREFIX = /^AGENTRY_/i;
/**
 * Text no store keeps as it is: a NUL character (PostgreSQL refuses it) or a lone UTF-16
 * surrogate (it has no UTF-8 form).
 */
const UNSTORABLE_SOURCE =
  '\\u0000|[\\ud800-\\udbff](?![\\udc00-\\udfff])|(?<![\\ud800-\\udbff])[\\udc00-\\udfff]';
export const UNSTORABLE = new RegExp(UNSTORABLE_SOURCE);
const UNSTORABLE_ALL = new RegExp(UNSTORABLE_SOURCE, 'g');

export function invalid(
  loc: (string | number)[],
  msg: string,
  input?: unknown,
): RequestValidationError {
  const issue: ValidationIssue = { loc, msg, type: 'value_error' };
  if (input !== undefined) issue.input = input;
  return new RequestValidationError([issue]);
}

/**
 * Why a file name is refused, or undefined when it is a safe relative name: words of letters,
 * digits, `_`, `.` and `-` separated by `/`, none empty, hidden (a leading dot) or `..`.
 */
function fileNameProblem(name: string): string | undefined {
  if (name.length === 0 || name.length > MAX_FILE_NAME_LENGTH) {
    return `a file name has 1 to ${MAX_FILE_NAME_LENGTH} characters`;
  }
  if (name.startsWith('/')) return 'a file name is relative (no leading /)';
  for (const segment of name.split('/')) {
    if (!FILE_SEGMENT.test(segment)) {
      return 'a file name is words of letters, digits, "_", "." and "-" separated by "/", none empty or starting with "." (no hidden files, no "..")';
    }
  }
  return undefined;
}

/**
 * Parses and checks the code as the Hosting API takes it: a JSON string of a list of 1 to 50
 * files `{name, value, language}` with safe, distinct relative names, one of them `agent.py`,
 * in all at most 1 MiB. Answers the files; a 422 naming the problem otherwise.
 */
export function parseCode(code: string): CodeFile[] {
  const loc = ['body', 'code'];
  if (Buffer.byteLength(code, 'utf8') > MAX_CODE_BYTES) {
    throw invalid(loc, `The code must be at most ${MAX_CODE_BYTES} bytes (1 MiB) in all`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(code);
  } catch {
    throw invalid(
      loc,
      'The code must be a JSON string of a list of files: [{"name": "agent.py", "value": "…", "language": "python"}]',
    );
  }
  if (!Array.isArray(parsed)) {
    throw invalid(loc, 'The code must be a JSON list of files, each {"name", "value", "language"}');
  }
  if (parsed.length === 0 || parsed.length > MAX_CODE_FILES) {
    throw invalid(loc, `The code must hold 1 to ${MAX_CODE_FILES} files (got ${parsed.length})`);
  }
  const names = new Set<string>();
  const files = parsed.map((item: unknown, index): CodeFile => {
    const at = [...loc, index];
    if (typeof item !== 'object' || item === null || Array.isArray(item)) {
      throw invalid(at, 'Each file is an object {"name", "value", "language"}');
    }
    const { name, value, language } = item as Record<string, unknown>;
    if (typeof name !== 'string') throw invalid([...at, 'name'], 'A file needs a name (text)');
    if (typeof value !== 'string') {
      throw invalid([...at, 'value'], `File "${name.slice(0, 64)}" needs a value (text)`);
    }
    if (language !== undefined && typeof language !== 'string') {
      throw invalid([...at, 'language'], 'A file’s language is text, such as "python"');
    }
    const problem = fileNameProblem(name);
    if (problem !== undefined) {
      throw invalid([...at, 'name'], `Bad file name "${name.slice(0, 64)}": ${problem}`);
    }
    if (names.has(name)) throw invalid([...at, 'name'], `Two files are named "${name}"`);
    names.add(name);
    if (UNSTORABLE.test(value)) {
      throw invalid([...at, 'value'], `File "${name}" holds a NUL character or a lone surrogate`);
    }
    return { name, value, language: (language ?? 'python').slice(0, 32) };
  });
  if (!names.has(AGENT_MAIN_FILE)) {
    throw invalid(loc, `The code must have a file named "${AGENT_MAIN_FILE}": it is what runs`);
  }
  return files;
}

/** Checks a secret's name: a Python identifier, not one of the names the runner sets. */
export function checkSecretName(name: string, loc: (string | number)[]): void {
  if (name.length > MAX_SECRET_NAME_LENGTH || !SECRET_NAME.test(name)) {
    throw invalid(
      loc,
      `A secret's name must be a Python identifier (letters, digits and "_", not starting with a digit, at most ${MAX_SECRET_NAME_LENGTH} characters)`,
      name,
    );
  }
  if (RESERVED_SECRET_PREFIX.test(name)) {
    throw invalid(loc, 'Names starting with AGENTRY_ are the runner’s own; choose another', name);
  }
}

export function checkStorageKey(key: string): void {
  if (key.length === 0 || key.length > MAX_STORAGE_KEY_LENGTH || UNSTORABLE.test(key)) {
    throw invalid(
      ['path', 'key'],
      `A storage key has 1 to ${MAX_STORAGE_KEY_LENGTH} characters, none of them NUL or a lone surrogate`,
    );
  }
}

/** A log line as stored: bounded, and only text every store keeps. */
export function storableEntry(entry: string): string {
  const clean = entry.replace(UNSTORABLE_ALL, '\uFFFD');
  return clean.length > MAX_LOG_ENTRY ? `${clean.slice(0, MAX_LOG_ENTRY - 1)}…` : clean;
}
