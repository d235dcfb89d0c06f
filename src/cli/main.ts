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
  redactUrl,
  type Config,
  type ConfigOverrides,
  type Quotas,
} from '../config/index.js';
import { userAddressOf } from '../crypto/index.js';
import { createContext } from '../context.js';
import { DomainError } from '../errors.js';
import type { Server } from '../server.js';
import { backupDatabase, BackupError, restoreDatabase } from '../store/backup.js';
import { createLogger } from '../logger.js';
import { DOMAIN_NAME_PATTERN } from '../wire/domain-name.js';
import { DELIVERY_EVENTS } from '../wire/deliveries.js';
import { canonicalAgentAddress } from '../wire/formats.js';

/**
 * The command line. The only module that writes to the terminal for people and decides the
 * process exit code; everything it does is a call into the server or the services.
 */

function integer(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('must be a whole number');
  return Number(value);
}

function positive(value: string): number {
  const n = integer(value);
  if (n < 1) throw new InvalidArgumentError('must be at least 1');
  return n;
}

function checkedDomainName(name: string): string {
  if (!new RegExp(DOMAIN_NAME_PATTERN).test(name)) {
    throw new InvalidArgumentError(
      `not a valid name: ${name} (lower-case letters, digits and hyphens, in dotted labels such as alice.agent)`,
    );
  }
  return name;
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

/**
 * The configuration of an admin command: quiet logs, and signatures checked on the main thread
 * (an admin command checks few or none, so starting verifier threads would only slow it down).
 */
function adminConfig(flags: StoreFlags, overrides: ConfigOverrides = {}): Config {
  return {
    ...loadConfig({ ...storeOverrides(flags), logLevel: 'warn', ...overrides }),
    verifierThreads: 0,
  };
}

/** Runs an admin command against the store (migrated first) and closes it. */
async function withServices<T>(
  flags: StoreFlags,
  work: (ctx: ReturnType<typeof createContext>) => Promise<T>,
): Promise<T> {
  const config = adminConfig(flags);
  // Admin output goes to stdout; keep logs on stderr.
  const ctx = createContext(config, { logger: adminLogger(config) });
  try {
    await ctx.store.migrate();
    return await work(ctx);
  } finally {
    await ctx.close();
  }
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
    // Loaded here: the HTTP stack is for serving; admin commands start faster without it.
    const { Server } = await import('../server.js');
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
  const config = adminConfig(flags, { migrateOnStart: false });
  const ctx = createContext(config, { logger: adminLogger(config) });
  try {
    const { applied } = await ctx.store.migrate();
    console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
  } finally {
    await ctx.close();
  }
});

withStoreOptions(
  program
    .command('backup <file>')
    .description('copy the embedded SQLite database to FILE while the server runs'),
).action(async (file: string, flags) => {
  const config = loadConfig({ ...storeOverrides(flags), logLevel: 'warn' });
  const { file: written, bytes } = await backupDatabase(config.databaseUrl, file);
  console.log(`backed up ${redactUrl(config.databaseUrl)} to ${written} (${bytes} bytes)`);
});

withStoreOptions(
  program
    .command('restore <file>')
    .description('replace the embedded SQLite database by a backup; refuses while it is in use'),
).action(async (file: string, flags) => {
  const config = loadConfig({ ...storeOverrides(flags), logLevel: 'warn' });
  const { database, replaced } = restoreDatabase(file, config.databaseUrl);
  console.log(`restored ${database} from ${file}`);
  if (replaced) console.log(`the database it replaced is kept as ${replaced}`);
});

const users = program.command('users').description('manage users');
withStoreOptions(
  users.command('add <name>').description('create a user; prints its API key last'),
).action(async (name: string, flags) => {
  await withServices(flags, async (ctx) => {
    const created = await ctx.services.users.createUser(name);
    console.log(
      `created user ${created.user.name} (${created.user.id}), sends as ${userAddressOf(created.user.id)}, key id ${created.keyId}`,
    );
    console.log(created.token);
  });
});
withStoreOptions(users.command('list').description('list users')).action(async (flags) => {
  await withServices(flags, async (ctx) => {
    for (const user of await ctx.services.users.listUsers()) {
      console.log(
        `${user.name}\t${user.id}\t${formatTime(user.created_at)}\t${userAddressOf(user.id)}`,
      );
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
    const owner = await ctx.services.users.findUser(user);
    const key = await ctx.services.keys.createKey(owner.id, { lifetimeMs: flags.expires });
    console.log(`key id ${key.id}, expires ${formatTime(key.expiresAt)}`);
    console.log(key.token);
  });
});
withStoreOptions(keys.command('list <user>').description("list a user's keys")).action(
  async (user: string, flags) => {
    await withServices(flags, async (ctx) => {
      console.log('id\tcreated\texpires\trevoked');
      for (const key of await ctx.services.keys.listKeys(user)) {
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
      await ctx.services.keys.revokeKey(keyId);
      console.log(`revoked ${keyId}`);
    });
  },
);

const domains = program
  .command('domains')
  .description('manage names (such as alice.agent) and the agents they resolve to');
withStoreOptions(
  domains
    .command('add <name> <address>')
    .description(
      "assign an agent to a name, claiming the name for the user when nobody has it; prints the name's agents",
    )
    .requiredOption('--user <user>', 'the user who owns the name (name or id)')
    .option(
      '--weight <n>',
      'how often resolution picks this agent, relative to the others',
      positive,
      1,
    ),
).action(async (name: string, address: string, flags) => {
  const domainName = checkedDomainName(name);
  const canonical = canonicalAgentAddress(address);
  if (canonical === undefined) throw new InvalidArgumentError(`not an agent address: ${address}`);
  await withServices(flags, async (ctx) => {
    const user = await ctx.services.users.findUser(flags.user as string);
    const domain = await ctx.services.domains.addAgent(
      { userId: user.id, operator: true },
      domainName,
      { address: canonical, weight: flags.weight as number },
    );
    for (const agent of domain.agents)
      console.log(`${domain.name}\t${agent.address}\t${agent.weight}`);
  });
});
withStoreOptions(
  domains.command('list').description('list every name, its owner and agents'),
).action(async (flags) => {
  await withServices(flags, async (ctx) => {
    const owners = new Map((await ctx.services.users.listUsers()).map((u) => [u.id, u.name]));
    for (const domain of await ctx.services.domains.list()) {
      const agents = domain.agents.map((agent) => `${agent.address}:${agent.weight}`).join(' ');
      console.log(
        `${domain.name}\t${owners.get(domain.user_id) ?? domain.user_id}\t${agents || '-'}`,
      );
    }
  });
});
withStoreOptions(domains.command('remove <name>').description('release a name')).action(
  async (name: string, flags) => {
    const domainName = checkedDomainName(name);
    await withServices(flags, async (ctx) => {
      await ctx.services.domains.remove({ userId: null, operator: true }, domainName);
      console.log(`removed ${domainName}`);
    });
  },
);

/** The answer of a local uAgent's inspector endpoint, or an error saying what went wrong. */
async function callLocalAgent(agent: string, path: string, body?: unknown): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(`${agent}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? null : JSON.stringify(body),
      signal: AbortSignal.timeout(60_000),
    });
  } catch {
    throw new ConnectError(`the agent at ${agent} does not answer: is it running?`);
  }
  const text = await res.text();
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    data = text;
  }
  if (!res.ok) throw new ConnectError(`the agent at ${agent} answered ${res.status}: ${text}`);
  return data;
}

class ConnectError extends Error {}

/**
 * Connects or disconnects a running uAgent as the inspector does: mints a key for the user
 * that lives five minutes, hands it to the agent's `/connect` or `/disconnect`, and revokes it.
 */
async function connectAgent(
  flags: StoreFlags & { agent: string; user: string },
  request: { agent_type?: 'mailbox' | 'proxy'; endpoint?: string },
): Promise<void> {
  const agent = flags.agent.replace(/\/+$/, '');
  const info = (await callLocalAgent(agent, '/agent_info')) as { address?: string };
  const action = request.agent_type ? 'connect' : 'disconnect';
  await withServices(flags, async (ctx) => {
    const user = await ctx.services.users.findUser(flags.user);
    const key = await ctx.services.keys.createKey(user.id, {
      label: `${action} ${info.address ?? agent}`,
      lifetimeMs: 300_000,
    });
    let answer: { success?: boolean; detail?: string | null };
    try {
      answer = (await callLocalAgent(agent, `/${action}`, {
        user_token: key.token,
        ...request,
      })) as typeof answer;
    } finally {
      await ctx.services.keys.revokeKey(key.id, user.id);
    }
    if (!answer?.success) {
      throw new ConnectError(
        `the agent could not ${action}: ${answer?.detail ?? 'no reason given'} (is it configured to use this Agentry?)`,
      );
    }
    console.log(
      action === 'connect'
        ? `connected ${info.address} as a ${request.agent_type} agent of ${user.name}`
        : `disconnected ${info.address}`,
    );
  });
}

withStoreOptions(
  program
    .command('connect')
    .description('connect a running uAgent to this Agentry, as the web inspector does')
    .requiredOption('--agent <url>', "the agent's local server, e.g. http://127.0.0.1:8001")
    .requiredOption('--user <user>', 'the user that will own the agent')
    .option('--mailbox', 'Agentry keeps its messages until it collects them')
    .option('--proxy <endpoint>', "Agentry forwards messages to the agent's public endpoint"),
).action(async (flags) => {
  if (Boolean(flags.mailbox) === Boolean(flags.proxy)) {
    throw new ConnectError('give either --mailbox or --proxy ENDPOINT');
  }
  await connectAgent(
    flags,
    flags.proxy ? { agent_type: 'proxy', endpoint: flags.proxy } : { agent_type: 'mailbox' },
  );
});

withStoreOptions(
  program
    .command('deliveries <address>')
    .description(
      "an agent's delivery trace, oldest first (time, event, uuid, sender, size, status, ms, detail)",
    )
    .option('--since <time>', 'only events at or after this moment (ISO-8601)')
    .addOption(new Option('--status <event>', 'only events of this kind').choices(DELIVERY_EVENTS))
    .option('--limit <n>', 'most events shown (default 100)', positive),
).action(async (address: string, flags) => {
  const agent = canonicalAgentAddress(address);
  if (!agent) throw new InvalidArgumentError(`not an agent address: ${address}`);
  let since: number | undefined;
  if (flags.since !== undefined) {
    since = Date.parse(flags.since as string);
    if (Number.isNaN(since)) throw new InvalidArgumentError(`not a moment: ${flags.since}`);
  }
  await withServices(flags, async (ctx) => {
    const rows = await ctx.store.repos.deliveries.list(agent, {
      ...(since !== undefined ? { since } : {}),
      ...(flags.status ? { events: [flags.status as string] } : {}),
      limit: (flags.limit as number | undefined) ?? 100,
      offset: 0,
    });
    const cell = (value: unknown): string => (value == null ? '-' : String(value));
    for (const row of rows) {
      console.log(
        [
          formatTime(Number(row.at)),
          row.event,
          row.uuid,
          row.sender,
          row.size,
          row.status_code,
          row.latency_ms,
          row.detail,
        ]
          .map(cell)
          .join('\t'),
      );
    }
  });
});

withStoreOptions(
  program
    .command('disconnect')
    .description('unregister a running uAgent from this Agentry')
    .requiredOption('--agent <url>', "the agent's local server, e.g. http://127.0.0.1:8001")
    .requiredOption('--user <user>', 'the user that owns the agent'),
).action(async (flags) => {
  await connectAgent(flags, {});
});

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
