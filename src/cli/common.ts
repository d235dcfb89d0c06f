import { resolve } from 'node:path';
import { InvalidArgumentError, Option, type Command } from 'commander';
import {
  loadConfig,
  logFormats,
  logLevels,
  parseDuration,
  type Config,
  type ConfigOverrides,
} from '../config/index.js';
import { createContext, type AppContext } from '../context.js';
import { createLogger } from '../logger.js';
import { checkDatabase } from '../store/database.js';
import { DOMAIN_NAME_PATTERN } from '../wire/domain-name.js';
import { canonicalAgentAddress } from '../wire/formats.js';
import { asUsageError } from './errors.js';

/**
 * What the commands share: argument parsers, the store options every command takes, the
 * configuration and services of an admin command, and how times are printed.
 */

/** A command registers itself, and its subcommands if it has any, on the program. */
export type AddCommand = (program: Command) => void;

export function integer(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('must be a whole number');
  return Number(value);
}

export function positive(value: string): number {
  const n = integer(value);
  if (n < 1) throw new InvalidArgumentError('must be at least 1');
  return n;
}

/** An agent address in its canonical spelling. */
export function checkedAgentAddress(address: string): string {
  const canonical = canonicalAgentAddress(address);
  if (canonical === undefined) throw new InvalidArgumentError(`not an agent address: ${address}`);
  return canonical;
}

/** An ISO-8601 moment, in milliseconds. */
export function moment(value: string): number {
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new InvalidArgumentError(`not a moment: ${value}`);
  return ms;
}

export function checkedDomainName(name: string): string {
  if (!new RegExp(DOMAIN_NAME_PATTERN).test(name)) {
    throw new InvalidArgumentError(
      `not a valid name: ${name} (lower-case letters, digits and hyphens, in dotted labels such as alice.agent)`,
    );
  }
  return name;
}

export function duration(value: string): number {
  try {
    return parseDuration(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

export interface StoreFlags {
  databaseUrl?: string;
  dataDir?: string;
}

export function storeOverrides(flags: StoreFlags): ConfigOverrides {
  if (flags.databaseUrl) return { databaseUrl: flags.databaseUrl };
  if (flags.dataDir) return { databaseUrl: `sqlite:${resolve(flags.dataDir, 'agentry.db')}` };
  return {};
}

/** The log options of a long-running command (`serve`, `runner`): `--log-level`, `--log-format`. */
export function withLogOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--log-level <level>', 'log level (AGENTRY_LOG_LEVEL)').choices(logLevels),
    )
    .addOption(
      new Option(
        '--log-format <format>',
        'json, or pretty for people (AGENTRY_LOG_FORMAT; default pretty on a terminal)',
      ).choices(logFormats),
    );
}

export function withStoreOptions(command: Command): Command {
  return command
    .option('--database-url <url>', 'sqlite:PATH or postgres://… (AGENTRY_DATABASE_URL)')
    .option('--data-dir <dir>', 'directory for the embedded SQLite database');
}

/**
 * The configuration of an admin command: quiet logs, and signatures checked on the main thread
 * (an admin command checks few or none, so starting verifier threads would only slow it down).
 */
export function adminConfig(flags: StoreFlags, overrides: ConfigOverrides = {}): Config {
  return {
    ...loadConfig({ ...storeOverrides(flags), logLevel: 'warn', ...overrides }),
    verifierThreads: 0,
  };
}

/** Commands print their answer on stdout; their (warning) logs go to stderr. */
export function adminLogger(config: Config) {
  return createLogger({ level: 'warn', format: config.logFormat, fd: 2 });
}

/** Runs an admin command against the store (migrated first) and closes it. */
export async function withServices<T>(
  flags: StoreFlags,
  work: (ctx: AppContext) => Promise<T>,
): Promise<T> {
  const config = adminConfig(flags);
  // An admin command never creates a database: only `serve` and `migrate` do.
  await checkDatabase(config.databaseUrl, { create: false }).catch((err: unknown) => {
    throw asUsageError(err, config.databaseUrl);
  });
  // Admin output goes to stdout; keep logs on stderr.
  const ctx = createContext(config, { logger: adminLogger(config) });
  try {
    await ctx.store.migrate();
    return await work(ctx);
  } finally {
    await ctx.close();
  }
}

export function formatTime(ms: number | null): string {
  return ms === null ? '-' : new Date(ms).toISOString();
}

/** One column of a listing: its header and how a row fills it. */
export interface Column<T> {
  header: string;
  cell(row: T): unknown;
}

/** Adds `--json` to a command that prints a listing. */
export function withJsonOption(command: Command): Command {
  return command.option('--json', 'one JSON object a line instead of a table');
}

/**
 * Prints a listing: a header line, then one tab-separated line a row (a missing value is `-`);
 * with `json`, one JSON object a line (`toJson` of each row) and no header. An empty listing
 * prints nothing on stdout and says so on stderr, so that a script reads no rows.
 */
export function printRows<T>(
  rows: T[],
  columns: Column<T>[],
  options: { json: boolean; toJson(row: T): unknown; none: string; header?: boolean },
): void {
  if (rows.length === 0) {
    if (options.header !== false) console.error(options.none);
    return;
  }
  const lines: string[] = [];
  if (!options.json && options.header !== false) {
    lines.push(columns.map((column) => column.header).join('\t'));
  }
  for (const row of rows) {
    if (options.json) lines.push(JSON.stringify(options.toJson(row)));
    else {
      lines.push(
        columns
          .map((column) => {
            const value = column.cell(row);
            return value === null || value === undefined || value === '' ? '-' : String(value);
          })
          .join('\t'),
      );
    }
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** A moment for JSON output: ISO-8601, or null. */
export function isoTime(ms: number | null | undefined): string | null {
  return ms === null || ms === undefined ? null : new Date(ms).toISOString();
}
