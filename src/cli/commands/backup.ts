import type { Command } from 'commander';
import { loadConfig, redactUrl } from '../../config/index.js';
import { backupDatabase, restoreDatabase } from '../../store/backup.js';
import { storeOverrides, withStoreOptions } from '../common.js';

/** `agentry backup FILE`: an online copy of the embedded SQLite database. */
export function addBackupCommand(program: Command): void {
  withStoreOptions(
    program
      .command('backup <file>')
      .description('copy the embedded SQLite database to FILE while the server runs'),
  ).action(async (file: string, flags) => {
    const config = loadConfig({ ...storeOverrides(flags), logLevel: 'warn' });
    const { file: written, bytes } = await backupDatabase(config.databaseUrl, file);
    console.log(`backed up ${redactUrl(config.databaseUrl)} to ${written} (${bytes} bytes)`);
  });
}

/** `agentry restore FILE`: puts a backup in place of the embedded SQLite database. */
export function addRestoreCommand(program: Command): void {
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
}
