import { basename, relative } from 'node:path';
import type { Command } from 'commander';
import { loadConfig, redactUrl, type Config } from '../../config/index.js';
import { findHostingPython } from '../../runner/python.js';
import type { Server } from '../../server.js';
import { checkDatabase, claimSqliteFile, sqlitePath } from '../../store/database.js';
import { integer, storeOverrides, withLogOptions, withStoreOptions } from '../common.js';
import { asUsageError } from '../errors.js';

/** This process's claim on its SQLite file (see {@link claimSqliteFile}). */
let claimed: { release(): void } | undefined;

/** `agentry serve`: runs the HTTP service until a signal stops it. */
export function addServeCommand(program: Command): void {
  withLogOptions(withStoreOptions(program.command('serve').description('run the HTTP service')))
    .option('-p, --port <port>', 'port to listen on (AGENTRY_PORT, default 8000)', integer)
    .option(
      '--host <host>',
      'address to bind (AGENTRY_HOST, default 127.0.0.1: this machine only; 0.0.0.0 for every interface)',
    )
    .option('--public-url <url>', 'URL agents use to reach this service (AGENTRY_PUBLIC_URL)')
    .option('--allow-private-targets', 'let the proxy forward to loopback and private networks')
    .option('--no-migrate', 'do not migrate the database at start')
    .option('--log-requests', 'log every request at info level (AGENTRY_LOG_REQUESTS)')
    .action(async (flags) => {
      const config = loadConfig({
        ...storeOverrides(flags),
        port: flags.port,
        host: flags.host,
        publicUrl: flags.publicUrl,
        allowPrivateTargets: flags.allowPrivateTargets,
        migrateOnStart: flags.migrate === false ? false : undefined,
        logLevel: flags.logLevel,
        logFormat: flags.logFormat,
        logRequests: flags.logRequests,
      });
      // Hosted agents run where the machine's Python can run them: looked for while the rest
      // of the start goes on (a Python start; uagents is not imported).
      const python =
        config.hosting.python === undefined && config.hosting.runner === 'serve'
          ? findHostingPython()
          : undefined;
      // One error that says what to do, before anything else tries the database.
      try {
        await checkDatabase(config.databaseUrl, { create: true });
        if (config.databaseUrl.startsWith('sqlite:') && config.sqliteExclusive) {
          // Kept for the life of the process: a lock collected as garbage would be released.
          claimed = claimSqliteFile(config.databaseUrl);
        }
      } catch (err) {
        throw asUsageError(err, config.databaseUrl);
      }
      // Loaded here: the HTTP stack is for serving; admin commands start faster without it.
      const { Server } = await import('../../server.js');
      const server = await Server.create(config, { python }).catch((err: unknown) => {
        throw asUsageError(err, config.databaseUrl);
      });
      closeOnSignals(server);
      // The block comes before the listening line, so whoever waits for that line has the key.
      await server
        .start((address) => process.stdout.write(startupBlock(server, config, address)))
        .catch(async (err: unknown) => {
          await server.close().catch(() => {});
          throw asUsageError(err, config.databaseUrl);
        });
    });
}

/** The database in use: a SQLite file by its full path, PostgreSQL without its password. */
function databaseLabel(url: string): string {
  return url.startsWith('sqlite:') ? `SQLite ${sqlitePath(url)}` : redactUrl(url);
}

/**
 * How a person runs the command line where this server was started: `npx agentry` in the
 * project's directory under `npm start` (after `npm ci` the package's own command is not on
 * the PATH, and npx finds it there without the network), `npm run agentry --` under another
 * npm script (`npm run dev`, no build), `agentry` when it was run by that name, else this
 * program's path (`node dist/agentry.js` in the container image).
 */
export function commandLine(): string {
  const script = process.env.npm_lifecycle_event;
  if (script === 'start') return 'npx agentry';
  if (script !== undefined) return 'npm run agentry --';
  const program = process.argv[1] ?? 'agentry';
  if (basename(program) === 'agentry') return 'agentry';
  return `node ${relative(process.cwd(), program) || program}`;
}

/**
 * What a person starting the server needs, in one block: where the console and the API docs
 * are, the database in use and what start did to it, the key made on first start, and how to
 * open the service to other machines when it listens on loopback only.
 */
export function startupBlock(server: Server, config: Config, address: string): string {
  const base = address.replace(/\/+$/, '');
  const loopback = /^(127\.|::1$|localhost$)/.test(config.host);
  const migrated = server.migrated;
  const lines = [
    '',
    `Agentry is running on ${base}${loopback ? ' (this machine only)' : ''}`,
    `  Console    ${base}/`,
    `  API docs   ${base}/docs`,
    `  Public URL ${config.publicUrl}`,
    `  Database   ${databaseLabel(config.databaseUrl)}${
      migrated.length > 0
        ? ` (migrated: ${migrated.length} migration${migrated.length === 1 ? '' : 's'} applied, now at ${migrated[migrated.length - 1]})`
        : ''
    }`,
  ];
  const hosted = hostingLine(server);
  if (hosted !== undefined) lines.push(`  Hosted     ${hosted}`);
  if (server.bootstrapped) {
    const { user, token } = server.bootstrapped;
    lines.push(
      '',
      `First start: created user "${user.name}". Its API key (shown once; keep it safe):`,
      '',
      `    ${token}`,
      '',
      `Use it as "Authorization: Bearer <key>", or sign in to the console with it. Make more with "${commandLine()} keys add ${user.name}".`,
    );
  }
  if (server.hostingKeyMade !== undefined) {
    lines.push(
      '',
      `First start: made the hosting key ${server.hostingKeyMade}, which seals hosted agents' keys and secrets. Back it up apart from the database.`,
    );
  }
  if (loopback) {
    lines.push(
      '',
      'Only this machine can connect. To accept others, start with --host 0.0.0.0 (AGENTRY_HOST) and set --public-url.',
    );
  }
  return `${lines.join('\n')}\n\n`;
}

/**
 * Whether hosted agents run, in a line: with which Python, or why not and the one command
 * that lets them.
 */
function hostingLine(server: Server): string | undefined {
  if (server.hosting === undefined) return undefined;
  if (server.hosting.kind === 'separate') {
    return 'agents run in "agentry runner" processes (AGENTRY_HOSTING_RUNNER=separate)';
  }
  const status = server.ctx.services.hosting.localStatus();
  if (!status.ready) {
    return `off: ${status.reason}. To run hosted agents: ${status.enable}, then start again`;
  }
  const { python, pythonVersion, uagents } = server.hosting as Extract<
    Server['hosting'],
    { kind: 'here' }
  >;
  const versions = [
    pythonVersion && `Python ${pythonVersion}`,
    uagents && `uagents ${uagents}`,
  ].filter(Boolean);
  return `ready: agents run with ${python}${versions.length > 0 ? ` (${versions.join(', ')})` : ''}`;
}

/**
 * Stops the server gracefully on SIGTERM (see {@link Server.drain}; the grace period is
 * AGENTRY_DRAIN_SECONDS) and on SIGINT without the grace period (a person at a terminal).
 * A second signal ends the grace period. Exits 0 once every request has been answered.
 */
function closeOnSignals(server: Server): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      server.endGracePeriod();
      return;
    }
    stopping = true;
    server.ctx.logger.info({ signal }, 'shutting down');
    const graceMs = signal === 'SIGTERM' ? server.ctx.config.drainSeconds * 1000 : 0;
    server.drain(graceMs).then(
      () => {
        server.ctx.logger.info('stopped');
        claimed?.release();
        process.exit(0);
      },
      (err: unknown) => {
        server.ctx.logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}
