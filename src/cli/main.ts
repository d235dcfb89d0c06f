#!/usr/bin/env node
import { resolve } from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { version } from '../app.js';
import {
  ConfigError,
  loadConfig,
  logFormats,
  logLevels,
  parseDuration,
  type Config,
  type ConfigOverrides,
  type Quotas,
} from '../config/index.js';
import { createContext } from '../context.js';
import { DomainError } from '../errors.js';
import { Server } from '../server.js';
import { createLogger } from '../logger.js';

/**
 * The command line. The only module that writes to the terminal for people and decides the
 * process exit code; everything it does is a call into the server or the services.
 */

function integer(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('must be a whole number');
  return Number(value);
}

function duration(value: string): number {
  try {
    return parseDuration(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

interface StoreFlags {
  databaseUrl?: string;
  dataDir?: string;
}

function storeOverrides(flags: StoreFlags): ConfigOverrides {
  if (flags.databaseUrl) return { databaseUrl: flags.databaseUrl };
  if (flags.dataDir) return { databaseUrl: `sqlite:${resolve(flags.dataDir, 'agentry.db')}` };
  return {};
}

function withStoreOptions(command: Command): Command {
  return command
    .option('--database-url <url>', 'sqlite:PATH or postgres://… (AGENTRY_DATABASE_URL)')
    .option('--data-dir <dir>', 'directory for the embedded SQLite database');
}

/** Runs an admin command against the store (migrated first) and closes it. */
async function withServices<T>(
  flags: StoreFlags,
  work: (ctx: ReturnType<typeof createContext>) => Promise<T>,
): Promise<T> {
  const config = loadConfig({ ...storeOverrides(flags), logLevel: 'warn' });
  // Admin output goes to stdout; keep logs on stderr.
  const ctx = createContext(config, { logger: adminLogger(config) });
  try {
    await ctx.store.migrate();
    return await work(ctx);
  } finally {
    await ctx.close();
  }
}

/** Stops the server on SIGINT/SIGTERM, letting requests in flight finish, then exits. */
function closeOnSignals(server: Server): void {
  const onSignal = (signal: NodeJS.Signals): void => {
    server.ctx.logger.info({ signal }, 'shutting down');
    server.close().then(
      () => process.exit(0),
      (err: unknown) => {
        server.ctx.logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
}

/** Commands print their answer on stdout; their (warning) logs go to stderr. */
function adminLogger(config: Config) {
  return createLogger({ level: 'warn', format: config.logFormat, fd: 2 });
}

function formatTime(ms: number | null): string {
  return ms === null ? '-' : new Date(ms).toISOString();
}

const program = new Command('agentry')
  .description('Self-hostable identity, registry, mailbox and proxy service for uAgents')
  .version(version);

withStoreOptions(program.command('serve', { isDefault: true }).description('run the HTTP service'))
  .option('-p, --port <port>', 'port to listen on (AGENTRY_PORT, default 8000)', integer)
  .option('--host <host>', 'address to bind (AGENTRY_HOST, default 0.0.0.0)')
  .option('--public-url <url>', 'URL agents use to reach this service (AGENTRY_PUBLIC_URL)')
  .option('--allow-private-targets', 'let the proxy forward to loopback and private networks')
  .option('--no-migrate', 'do not migrate the database at start')
  .addOption(new Option('--log-level <level>', 'log level (AGENTRY_LOG_LEVEL)').choices(logLevels))
  .addOption(
    new Option(
      '--log-format <format>',
      'json, or pretty for people (AGENTRY_LOG_FORMAT; default pretty on a terminal)',
    ).choices(logFormats),
  )
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
    });
    const server = await Server.create(config);
    closeOnSignals(server);
    // The key comes before the listening line, so whoever waits for that line has it too.
    if (server.bootstrapped) {
      const { user, token } = server.bootstrapped;
      process.stdout.write(
        [
          '',
          `First start: created user "${user.name}". Its API key (shown once; keep it safe):`,
          '',
          `    ${token}`,
          '',
          `Use it as "Authorization: Bearer <key>". Make more with "agentry keys add ${user.name}".`,
          '',
        ].join('\n') + '\n',
      );
    }
    await server.start();
  });

withStoreOptions(
  program.command('migrate').description('bring the database schema up to date'),
).action(async (flags) => {
  const config = loadConfig({ ...storeOverrides(flags), migrateOnStart: false });
  const ctx = createContext(config, { logger: adminLogger(config) });
  try {
    const { applied } = await ctx.store.migrate();
    console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
  } finally {
    await ctx.close();
  }
});

const users = program.command('users').description('manage users');
withStoreOptions(
  users.command('add <name>').description('create a user; prints its API key last'),
).action(async (name: string, flags) => {
  await withServices(flags, async (ctx) => {
    const created = await ctx.services.users.createUser(name);
    console.log(`created user ${created.user.name} (${created.user.id}), key id ${created.keyId}`);
    console.log(created.token);
  });
});
withStoreOptions(users.command('list').description('list users')).action(async (flags) => {
  await withServices(flags, async (ctx) => {
    for (const user of await ctx.services.users.listUsers()) {
      console.log(`${user.name}\t${user.id}\t${formatTime(user.created_at)}`);
    }
  });
});

withStoreOptions(
  users
    .command('limits <user>')
    .description("set a user's quotas (defaults come from AGENTRY_QUOTA_*); prints the limits")
    .option('--agents <n>', 'agents the user may register', integer)
    .option('--messages <n>', 'messages submitted to their agents per month', integer)
    .option('--bytes-stored <n>', 'bytes held in their mailboxes', integer)
    .option('--bytes-transferred <n>', 'envelope bytes served to their agents per month', integer),
).action(async (name: string, flags) => {
  await withServices(flags, async (ctx) => {
    const user = await ctx.services.users.findUser(name);
    const changes: Partial<Quotas> = {
      agents: flags.agents,
      messagesPerMonth: flags.messages,
      bytesStored: flags.bytesStored,
      bytesTransferredPerMonth: flags.bytesTransferred,
    };
    const given = Object.values(changes).some((value) => value !== undefined);
    const limits = given
      ? await ctx.services.usage.setLimits(user.id, changes)
      : await ctx.services.usage.limitsFor(user.id);
    console.log(`agents\t${limits.agents}`);
    console.log(`messages\t${limits.messagesPerMonth}`);
    console.log(`bytes-stored\t${limits.bytesStored}`);
    console.log(`bytes-transferred\t${limits.bytesTransferredPerMonth}`);
  });
});

const keys = program.command('keys').description('manage API keys');
withStoreOptions(
  keys
    .command('add <user>')
    .description('create an API key for a user; prints it last')
    .option('--expires <duration>', 'lifetime such as 30d, 12h, 2w', duration),
).action(async (user: string, flags) => {
  await withServices(flags, async (ctx) => {
    const key = await ctx.services.users.addKey(user, flags.expires);
    console.log(`key id ${key.keyId}, expires ${formatTime(key.expiresAt)}`);
    console.log(key.token);
  });
});
withStoreOptions(keys.command('list <user>').description("list a user's keys")).action(
  async (user: string, flags) => {
    await withServices(flags, async (ctx) => {
      console.log('id\tcreated\texpires\trevoked');
      for (const key of await ctx.services.users.listKeys(user)) {
        console.log(
          `${key.id}\t${formatTime(key.createdAt)}\t${formatTime(key.expiresAt)}\t${formatTime(key.revokedAt)}`,
        );
      }
    });
  },
);
withStoreOptions(keys.command('revoke <keyId>').description('revoke an API key')).action(
  async (keyId: string, flags) => {
    await withServices(flags, async (ctx) => {
      await ctx.services.users.revokeKey(keyId);
      console.log(`revoked ${keyId}`);
    });
  },
);

program.parseAsync(process.argv).catch((err: unknown) => {
  if (err instanceof ConfigError || err instanceof DomainError) {
    console.error(`agentry: ${err.message}`);
    process.exit(2);
  }
  console.error(err);
  process.exit(1);
});
