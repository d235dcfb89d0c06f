import { availableParallelism } from 'node:os';
import { startWorker } from '../../src/infra/worker-threads.js';
import type { BodyJob } from './bodies.js';

/**
 * Bodies 0 to `count` - 1 of `job`, signed in one worker thread per core (signing costs about
 * 0.4 ms a signature, which would make preparing a run take longer than running it).
 */
export async function signInWorkers(job: BodyJob, count: number): Promise<string[]> {
  const threads = Math.min(availableParallelism(), Math.max(1, Math.floor(count / 256)));
  const slices = Array.from({ length: threads }, (_, i) => ({
    from: Math.floor((count * i) / threads),
    to: Math.floor((count * (i + 1)) / threads),
  }));
  const parts = await Promise.all(
    slices.map(
      ({ from, to }) =>
        new Promise<string[]>((resolve, reject) => {
          const thread = startWorker(import.meta.url, 'sign-worker', {
            workerData: { job, from, to },
          });
          thread.once('message', resolve);
          thread.once('error', reject);
          thread.once('exit', (code) => {
            if (code !== 0) reject(new Error(`a signing worker exited with code ${code}`));
          });
        }),
    ),
  );
  return parts.flat();
}
