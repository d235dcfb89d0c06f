import type { Command } from 'commander';
import { createContext } from '../../context.js';
import { checkDatabase } from '../../store/database.js';
import { adminConfig, adminLogger, withStoreOptions } from '../common.js';
import { asUsageError } from '../errors.js';

/** `agentry migrate`: applies the migrations the database lacks. */
export function addMigrateCommand(program: Command): void {
  withStoreOptions(
    program.command('migrate').description('bring the database schema up to date'),
  ).action(async (flags) => {
    const config = adminConfig(flags, { migrateOnStart: false });
    await checkDatabase(config.databaseUrl, { create: true }).catch((err: unknown) => {
      throw asUsageError(err, config.databaseUrl);
    });
    const ctx = createContext(config, { logger: adminLogger(config) });
    try {
      const { applied } = await ctx.store.migrate();
      console.log(
        applied.length
          ? `applied ${applied.length} migration${applied.length === 1 ? '' : 's'}, now at ${applied[applied.length - 1]}`
          : 'database is up to date',
      );
    } finally {
      await ctx.close();
    }
  });
}
