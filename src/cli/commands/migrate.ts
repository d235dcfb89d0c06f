import type { Command } from 'commander';
import { createContext } from '../../context.js';
import { adminConfig, adminLogger, withStoreOptions } from '../common.js';

/** `agentry migrate`: applies the migrations the database lacks. */
export function addMigrateCommand(program: Command): void {
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
}
