import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { freePort } from '../../test/kit/ports.js';
import { ChildRun, repositoryRoot } from '../../test/kit/process.js';
import type { BenchDatabase } from './databases.js';
import { RssSampler } from './rss.js';

/**
 * Compiles the service in `root` (this checkout unless given) to its dist/ exactly as
 * `npm start` does, so the benchmark runs the code people deploy (under tsx the process would
 * also carry the loader and an esbuild child).
 */
export async function buildService(root = repositoryRoot): Promise<void> {
  // A build that ships one file is built as `npm start` builds it; an older one by tsc alone.
  const args = shipsOneFile(root)
    ? [join(root, 'scripts/build.js'), '--changed', 'server']
    : [
        createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc'),
        '-p',
        'tsconfig.build.json',
      ];
  const build = ChildRun.node('build', args, process.env, root);
  const code = await build.waitForExit();
  if (code !== 0) throw new Error(`the build failed:\n${build.output()}`);
}

/** Whether the checkout at `root` ships its command line as one file (scripts/bundle.js). */
function shipsOneFile(root: string): boolean {
  return existsSync(join(root, 'scripts/bundle.js'));
}

/** What a build's `npm start` runs: its one file, or an older build's compiled entry. */
function serverEntry(root: string): string {
  return shipsOneFile(root) ? 'dist/agentry.js' : 'dist/cli/main.js';
}

/** The environment without the caller's AGENTRY_* settings, so every run measures defaults. */
function cleanEnvironment(settings: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('AGENTRY_')),
  );
  return { ...env, ...settings };
}

/** Asks `GET /health` until it answers 200; fails if the child exits or a minute passes. */
async function waitUntilHealthy(url: string, child: ChildRun, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answered = await fetch(`${url}/health`).then(
      (response) => response.status === 200,
      () => false,
    );
    if (answered) return;
    if (child.hasExited()) {
      throw new Error(`${child.name} exited before it answered:\n${child.output()}`);
    }
    if (Date.now() > deadline) {
      throw new Error(`${child.name} did not answer after ${timeoutMs} ms:\n${child.output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A serving process of the bench. */
export interface ServingProcess {
  /** Base URL, e.g. http://127.0.0.1:41234 */
  url: string;
  pid: number;
  /** Stops the server; resolves to its peak resident memory in bytes. */
  stop(): Promise<number>;
}

export interface RunningService extends ServingProcess {
  /** API key of the user the first start created. */
  apiKey: string;
}

/**
 * Starts `agentry serve` from dist/ in a child process over `database`, with rate limits
 * off and warnings-only logging. `settings` adds AGENTRY_* variables; `nodeArgs` go to
 * Node itself (such as `--cpu-prof`); `root` is the checkout whose build runs (this one
 * unless given). The peak memory `stop` answers counts the processes the server starts,
 * unless `ownMemoryOnly`.
 */
export async function startService(
  database: BenchDatabase,
  settings: Record<string, string> = {},
  nodeArgs: string[] = [],
  root = repositoryRoot,
  ownMemoryOnly = false,
): Promise<RunningService> {
  return launch(database, settings, nodeArgs, root, ownMemoryOnly, async (child) => {
    // The key is printed just before the server listens.
    const [, apiKey] = await child.waitForOutput(/API key[^\n]*\n\s*\n\s*(\S+)\s*\n/);
    return { apiKey: apiKey! };
  });
}

/**
 * Starts a further replica on a database that {@link startService} set up: the same command
 * and settings, but no key is printed (the user exists).
 */
export function startReplica(
  database: BenchDatabase,
  settings: Record<string, string> = {},
): Promise<ServingProcess> {
  return launch(database, settings, [], repositoryRoot, false, async () => ({}));
}

async function launch<T extends object>(
  database: BenchDatabase,
  settings: Record<string, string>,
  nodeArgs: string[],
  root: string,
  ownMemoryOnly: boolean,
  starting: (child: ChildRun) => Promise<T>,
): Promise<ServingProcess & T> {
  const port = await freePort();
  const child = ChildRun.node(
    'agentry serve',
    [
      ...nodeArgs,
      serverEntry(root),
      'serve',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--database-url',
      database.url,
      '--log-level',
      'warn',
    ],
    cleanEnvironment({ AGENTRY_RATE_LIMIT_MAX: '0', AGENTRY_DRAIN_SECONDS: '0', ...settings }),
    root,
  );
  const rss = new RssSampler(child.pid, { ownOnly: ownMemoryOnly });
  try {
    const started = await starting(child);
    // At log level warn nothing says when the server listens: its health check is asked.
    const url = `http://127.0.0.1:${port}`;
    await waitUntilHealthy(url, child);
    return {
      ...started,
      url,
      pid: child.pid,
      stop: async () => {
        const peak = rss.stop();
        await child.stop();
        return peak;
      },
    };
  } catch (err) {
    rss.stop();
    await child.stop();
    throw err;
  }
}
