import { parentPort, workerData } from 'node:worker_threads';
import { openSqliteConnection } from './sqlite-connection.js';

/**
 * The thread of a {@link BackgroundCheckpointer}: its own connection copies committed pages
 * from the write-ahead log into the database file every `intervalMs`, and stops when told.
 */
const { path, intervalMs } = workerData as { path: string; intervalMs: number };
const sqlite = openSqliteConnection(path);
// PASSIVE never waits for, or holds up, the service's writer and readers.
const timer = setInterval(() => sqlite.pragma('wal_checkpoint(PASSIVE)'), intervalMs);

parentPort!.once('message', () => {
  clearInterval(timer);
  sqlite.close();
  parentPort!.close();
});
