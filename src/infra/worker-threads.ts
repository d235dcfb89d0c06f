import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * Starts the worker module `name` that sits beside the module at `callerUrl` (its
 * `import.meta.url`). Run from source under tsx (tests, `npm run dev`) the modules are
 * TypeScript, and worker threads do not inherit tsx's loader on Node 20: such a thread
 * registers the loader before it imports the module.
 */
export function startWorker(callerUrl: string, name: string, options: WorkerOptions = {}): Worker {
  const fromSource = callerUrl.endsWith('.ts');
  const url = new URL(`./${name}.${fromSource ? 'ts' : 'js'}`, callerUrl);
  if (!fromSource) return new Worker(url, options);
  const tsx = JSON.stringify(import.meta.resolve('tsx/esm/api'));
  const bootstrap = `import(${tsx}).then(({ tsImport }) => tsImport(${JSON.stringify(url.href)}, ${JSON.stringify(callerUrl)}));`;
  return new Worker(bootstrap, { ...options, eval: true });
}
