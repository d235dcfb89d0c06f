import { once } from 'node:events';
import type { Worker } from 'node:worker_threads';
import { startWorker } from '../infra/worker-threads.js';

/**
 * Moves SQLite's checkpoints off the event loop. In WAL mode a commit only appends to the
 * log; a checkpoint copies the log back into the database file and waits for the disk twice,
 * and by default the commit that fills the log past 1000 pages runs it, holding the event
 * loop for milliseconds. Here a worker thread does that work every `intervalMs`; the
 * service's own connection keeps a larger threshold only as a backstop, should the thread
 * fall behind or stop, so the log stays bounded either way.
 */
export class BackgroundCheckpointer {
  private constructor(private readonly worker: Worker) {}

  /** `onError` hears why the thread stopped if it fails; the backstop then takes over. */
  static start(
    path: string,
    intervalMs: number,
    onError: (error: unknown) => void,
  ): BackgroundCheckpointer {
    const worker = startWorker(import.meta.url, 'checkpoint-worker', {
      workerData: { path, intervalMs },
    });
    worker.on('error', onError);
    return new BackgroundCheckpointer(worker);
  }

  /** Lets the thread finish its checkpoint and close its connection. */
  async stop(): Promise<void> {
    if (this.worker.threadId === -1) return;
    const exited = once(this.worker, 'exit');
    this.worker.postMessage('stop');
    await exited;
  }
}
