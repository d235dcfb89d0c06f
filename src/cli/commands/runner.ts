import type { Command } from 'commander';
import { loadConfig } from '../../config/index.js';
import { createContext, createHostingRunner } from '../../context.js';
import { checkDatabase } from '../../store/database.js';
import { storeOverrides, withLogOptions, withStoreOptions } from '../common.js';
import { asUsageError, UsageError } from '../errors.js';

/**
 * `agentry runner`: runs hosted agents, and nothing else, against the configured database,
 * for deployments that keep agents apart from the HTTP service (AGENTRY_HOSTING_RUNNER=separate).
 * Any number of runners and servers share the database; claims decide who runs which agent.
 */
export function addRunnerCommand(program: Command): void {
  withLogOptions(
    withStoreOptions(
      program
        .command('runner')
        .description('run hosted agents (AGENTRY_HOSTING_PYTHON) without serving HTTP'),
    ),
  )
    .option(
      '--public-url <url>',
      'URL the agents reach Agentry by, that of its servers (AGENTRY_PUBLIC_URL)',
    )
    .option('--no-migrate', 'do not migrate the database at start')
    .action(async (flags) => {
      const config = {
        ...loadConfig({
          ...storeOverrides(flags),
          publicUrl: flags.publicUrl,
          migrateOnStart: flags.migrate === false ? false : undefined,
          logLevel: flags.logLevel,
          logFormat: flags.logFormat,
        }),
        // A runner checks no signatures.
        verifierThreads: 0,
      };
      if (config.hosting.python === undefined) {
        throw new UsageError(
          'agentry runner runs hosted agents with the Python interpreter in AGENTRY_HOSTING_PYTHON (one with uagents installed): set it.',
        );
      }
      try {
        await checkDatabase(config.databaseUrl, { create: config.migrateOnStart });
      } catch (err) {
        throw asUsageError(err, config.databaseUrl);
      }
      const ctx = createContext(config);
      const runner = createHostingRunner(ctx);
      try {
        if (config.migrateOnStart) await ctx.store.migrate();
        await runner.start();
      } catch (err) {
        await ctx.close().catch(() => {});
        throw asUsageError(err, config.databaseUrl);
      }
      let stopping = false;
      const onSignal = (signal: NodeJS.Signals): void => {
        if (stopping) return;
        stopping = true;
        ctx.logger.info({ signal }, 'shutting down');
        runner
          .stop()
          .then(() => ctx.close())
          .then(
            () => {
              ctx.logger.info('stopped');
              process.exit(0);
            },
            (err: unknown) => {
              ctx.logger.error({ err }, 'shutdown failed');
              process.exit(1);
            },
          );
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
    });
}
