#!/usr/bin/env node
import { Command, InvalidArgumentError } from 'commander';
import { version } from '../app.js';
import { ConfigError } from '../config/index.js';
import { DomainError } from '../errors.js';
import { BackupError } from '../store/backup.js';
import { addActivityCommand } from './commands/activity.js';
import { addAgentsCommand } from './commands/agents.js';
import { addBackupCommand, addRestoreCommand } from './commands/backup.js';
import { addConnectCommand, addDisconnectCommand, ConnectError } from './commands/connect.js';
import { addDeliveriesCommand } from './commands/deliveries.js';
import { addDomainsCommand } from './commands/domains.js';
import { addKeysCommand } from './commands/keys.js';
import { addMigrateCommand } from './commands/migrate.js';
import { addServeCommand } from './commands/serve.js';
import { addTeamsCommand } from './commands/teams.js';
import { addUsersCommand } from './commands/users.js';
import type { AddCommand } from './common.js';

/**
 * The command line: the program, its commands (in commands/, each calling the server or the
 * services) and the exit code of a command that fails.
 */

/** Every command, in the order `agentry --help` lists them. */
const commands: AddCommand[] = [
  addServeCommand,
  addMigrateCommand,
  addBackupCommand,
  addRestoreCommand,
  addUsersCommand,
  addTeamsCommand,
  addKeysCommand,
  addDomainsCommand,
  addConnectCommand,
  addAgentsCommand,
  addDeliveriesCommand,
  addActivityCommand,
  addDisconnectCommand,
];

const program = new Command('agentry')
  .description('Self-hostable identity, registry, mailbox and proxy service for uAgents')
  .version(version);
for (const add of commands) add(program);

/**
 * An error whose message tells the person what to correct exits 2; any other is printed whole
 * and exits 1.
 */
program.parseAsync(process.argv).catch((err: unknown) => {
  if (
    err instanceof ConfigError ||
    err instanceof DomainError ||
    err instanceof InvalidArgumentError ||
    err instanceof ConnectError ||
    err instanceof BackupError
  ) {
    console.error(`agentry: ${err.message}`);
    process.exit(2);
  }
  console.error(err);
  process.exit(1);
});
