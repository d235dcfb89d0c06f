import { Option, type Command } from 'commander';
import { loadConfig, logFormats, logLevels } from '../../config/index.js';
import type { Server } from '../../server.js';
import { integer, storeOverrides, withStoreOptions } from '../common.js';

/** `agentry serve`, the default command: runs the HTTP service until a signal stops it. */
export function addServeCommand(program: Command): void {
  withStoreOptions(
    program.command('serve', { isDefault: true }).description('run the HTTP service'),
  )
    .option('-p, --port <port>', 'port to listen on (AGENTRY_PORT, default 8000)', integer)
    .option('--host <host>', 'address to bind (AGENTRY_HOST, default 0.0.0.0)')
    .option('--public-url <url>', 'URL agents use to reach this service (AGENTRY_PUBLIC_URL)')
    .option('--allow-private-targets', 'let the proxy forward to loopback and private networks')
    .option('--no-migrate', 'do not migrate the database at start')
    .addOption(
      new Option('--log-level <level>', 'log level (AGENTRY_LOG_LEVEL)').choices(logLevels),
    )
    .addOption(
      new Option(
        '--log-format <format>',
        'json, or pretty for people (AGENTRY_LOG_FORMAT; default pretty on a terminal)',
      ).choices(logFormats),
    )
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
      // Loaded here: the HTTP stack is for serving; admin commands start faster without it.
      const { Server } = await import('../../server.js');
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
