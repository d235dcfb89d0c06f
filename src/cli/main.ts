#!/usr/bin/env node
import { Command, InvalidArgumentError } from 'commander';
import { version } from '../version.js';
import { ConfigError } from '../config/index.js';
import { DomainError } from '../errors.js';
import { BackupError } from '../store/backup.js';
import { addActivityCommand } from './commands/activity.js';
import { addAgentsCommand } from './commands/agents.js';
import { addBackupCommand, addRestoreCommand } from './commands/backup.js';
import { addChatCommand } from './commands/chat.js';
import { addConnectCommand, addDisconnectCommand, ConnectError } from './commands/connect.js';
import { addDeliveriesCommand } from './commands/deliveries.js';
import { addDomainsCommand } from './commands/domains.js';
import { addKeysCommand } from './commands/keys.js';
import { addMigrateCommand } from './commands/migrate.js';
import { addProbesCommand } from './commands/probes.js';
import { addRunnerCommand } from './commands/runner.js';
import { addServeCommand } from './commands/serve.js';
import { addTeamsCommand } from './commands/teams.js';
import { addStatusCommand } from './commands/status.js';
import { addUsersCommand } from './commands/users.js';
import { addWebhooksCommand } from './commands/webhooks.js';
import type { AddCommand } from './common.js';
import { CommandError, explain, UsageError } from './errors.js';

/**
 * The command line: the program, its commands (in commands/, each calling the server or the
 * services) and the exit code of a command that fails.
 */

/** Every command, in the order `agentry --help` lists them. */
const commands: AddCommand[] = [
  addServeCommand,
  addRunnerCommand,
  addStatusCommand,
  addMigrateCommand,
  addBackupCommand,
  addRestoreCommand,
  addUsersCommand,
  addTeamsCommand,
  addKeysCommand,
  addAgentsCommand,
  addDomainsCommand,
  addConnectCommand,
  addDeliveriesCommand,
  addWebhooksCommand,
  addActivityCommand,
  addProbesCommand,
  addDisconnectCommand,
  addChatCommand,
];

/** Stack traces of failures are for `--debug` (anywhere on the line) or the debug log level. */
const debug =
  process.argv.includes('--debug') || /^(debug|trace)$/.test(process.env.AGENTRY_LOG_LEVEL ?? '');
const argv = process.argv.filter((arg) => arg !== '--debug');

// A reader that stops early (`agentry activity … --json | head -1`) ends any command, quietly.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
}

const program = new Command('agentry')
  .description('Self-hostable identity, registry, mailbox and proxy service for uAgents')
  .version(version)
  // Commander has said what is wrong (an unknown command or option, a missing argument): a
  // mistake to correct, exit code 2; its help and version exit 0. Commands inherit this.
  .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2))
  .option('--debug', 'print the stack trace of a failure')
  .showHelpAfterError('(run "agentry --help" for the commands, "agentry COMMAND --help" for one)')
  .showSuggestionAfterError(true)
  .addHelpText(
    'after',
    '\nStart with "agentry serve" (then open the console URL it prints). Admin commands open the\nsame database as the server: run them from its directory or give --data-dir/--database-url.\n"agentry chat" talks to a running server instead, with a user\'s API key (AGENTRY_API_KEY).',
  );
for (const add of commands) add(program);

/**
 * A {@link CommandError} exits with its own code (errors.ts lists them). An error whose
 * message tells the person what to correct exits 2, as does a failure of the
 * surroundings explained in a sentence (a port in use, a database that does not answer); any
 * other is a fault, summarised in a line (printed whole under --debug) and exits 1.
 */
function fail(err: unknown): never {
  if (err instanceof CommandError) {
    console.error(`agentry: ${err.message}`);
    if (debug && err.cause !== undefined) console.error(err.cause);
    process.exit(err.exitCode);
  }
  if (
    err instanceof ConfigError ||
    err instanceof DomainError ||
    err instanceof InvalidArgumentError ||
    err instanceof ConnectError ||
    err instanceof BackupError ||
    err instanceof UsageError
  ) {
    console.error(`agentry: ${err.message}`);
    if (debug && err.cause !== undefined) console.error(err.cause);
    process.exit(2);
  }
  const sentence = explain(err);
  if (sentence !== undefined) {
    console.error(`agentry: ${sentence}`);
    if (debug) console.error(err);
    process.exit(2);
  }
  if (debug) console.error(err);
  else {
    console.error(
      `agentry: unexpected failure: ${err instanceof Error ? err.message : String(err)}\n(run again with --debug for the details)`,
    );
  }
  process.exit(1);
}

// A bare `agentry` prints the help (exit 0); it starts nothing.
if (argv.length <= 2) {
  program.outputHelp();
  process.exit(0);
}
program.parseAsync(argv).catch(fail);
