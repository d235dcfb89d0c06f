import { closeSync, fdatasyncSync, openSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { CheckpointPasses } from './checkpoint-passes.js';
import { openSqliteConnection } from './sqlite-connection.js';

/**
 * The thread of a {@link BackgroundCheckpointer}: its own connection runs a pass of
 * {@link CheckpointPasses} every `intervalMs`, and stops when told.
 */
const { path, intervalMs } = workerData as { path: string; intervalMs: number };
const sqlite = openSqliteConnection(path);
// Opened to be synced: SQLite's own descriptors of the file are not reachable from here.
const databaseFile = openSync(path, 'r');
const passes = new CheckpointPasses(sqlite, () => fdatasyncSync(databaseFile));
const timer = setInterval(() => passes.pass(), intervalMs);

parentPort!.once('message', () => {
  clearInterval(timer);
  sqlite.close();
  closeSync(databaseFile);
  parentPort!.close();
});
