import { redactUrl } from '../config/index.js';

/**
 * Failures a person can cause at start or in a command, said in a sentence or two that say
 * what to do. Anything else is a fault of the program and is printed whole.
 */

/** A failure whose message already says what to correct: printed alone, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

interface SystemError extends Error {
  code?: string;
  address?: string;
  port?: number;
  hostname?: string;
  syscall?: string;
}

/** The PostgreSQL database of `databaseUrl`, without its password, for messages. */
function where(databaseUrl: string): string {
  return redactUrl(databaseUrl);
}

/**
 * The sentence for an error a person can fix (a port in use, a database that does not answer
 * or refuses), or undefined for any other error. `databaseUrl` names the database in use.
 */
export function explain(err: unknown, databaseUrl?: string): string | undefined {
  if (!(err instanceof Error)) return undefined;
  const e = err as SystemError;
  if (e.code === 'EADDRINUSE') {
    return `port ${e.port} on ${e.address} is already in use (is Agentry already running?). Stop the other process, or choose another port with --port or AGENTRY_PORT.`;
  }
  if (e.code === 'EADDRNOTAVAIL') {
    return `cannot listen on ${e.address}: this machine has no such address. Give --host 127.0.0.1 (this machine only) or --host 0.0.0.0 (every interface).`;
  }
  if (e.code === 'EACCES' && e.syscall === 'listen') {
    return `not allowed to listen on port ${e.port} (ports below 1024 need privileges). Choose another port with --port, such as 8000.`;
  }
  const db = databaseUrl === undefined ? 'the database' : where(databaseUrl);
  if (
    e.code === 'ECONNREFUSED' ||
    e.code === 'ENOTFOUND' ||
    e.code === 'EAI_AGAIN' ||
    e.code === 'ETIMEDOUT' ||
    e.code === 'EHOSTUNREACH'
  ) {
    return `cannot reach the database at ${db} (${e.code}). Is PostgreSQL running there? Check AGENTRY_DATABASE_URL or --database-url.`;
  }
  // PostgreSQL's own refusals, by SQLSTATE.
  if (e.code === '28P01' || e.code === '28000') {
    return `the database at ${db} refused the credentials (${e.message}). Check the user and password in AGENTRY_DATABASE_URL.`;
  }
  if (e.code === '3D000') {
    return `${e.message} at ${db}. Create it (createdb), or name an existing one in AGENTRY_DATABASE_URL.`;
  }
  if (e.code === 'SQLITE_CANTOPEN') {
    return `cannot open the SQLite database ${db}: ${e.message}. Check that its directory exists and is writable, or give --data-dir.`;
  }
  if (e.code === 'SQLITE_NOTADB' || e.code === 'SQLITE_CORRUPT') {
    return `${db} is not an intact SQLite database (${e.message}). Give the right file with --data-dir or --database-url, or restore a backup (agentry restore).`;
  }
  return undefined;
}

/** A failure a person can fix, as a {@link UsageError}; any other error unchanged. */
export function asUsageError(err: unknown, databaseUrl: string): unknown {
  if (err instanceof UsageError) return err;
  if (err instanceof Error && /^Database(Missing|InUse)Error$/.test(err.name)) {
    return new UsageError(err.message, { cause: err });
  }
  const sentence = explain(err, databaseUrl);
  return sentence === undefined ? err : new UsageError(sentence, { cause: err });
}

/**
 * The exit codes of a failure: 1 a fault of the program, 2 something the person can correct
 * (or a failure of the surroundings said in a sentence), 3 a server that does not answer (as
 * `agentry status` says), 4 an agent that was not reached or did not answer in time.
 */
export const EXIT_FAULT = 1;
export const EXIT_USAGE = 2;
export const EXIT_NO_SERVER = 3;
export const EXIT_NO_AGENT = 4;

/** A failure said in one sentence, with the exit code it ends the command with. */
export class CommandError extends Error {
  override name = 'CommandError';
  constructor(
    message: string,
    readonly exitCode: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
