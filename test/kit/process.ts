import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where package.json is: child processes run there. */
export const repositoryRoot = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The command line as it ships: `npm run build` compiles it to dist/ and joins it into one file,
 * which `npm start` runs. Child processes run it too (see {@link agentryArgs}), which also
 * starts each one in a fraction of the time of running the sources under tsx.
 */
export const agentryEntry = join(repositoryRoot, 'dist/agentry.js');

/** The newest modification time of any file under `dir`. */
export function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

let compiled = false;

/**
 * Builds the server (`npm run build -- server`, tsc then the bundle) when dist/ is missing or
 * older than any source, so that a child never runs yesterday's code.
 */
export function ensureServerBuild(): void {
  if (compiled) return;
  const sources = Math.max(
    newestMtime(join(repositoryRoot, 'src')),
    statSync(join(repositoryRoot, 'tsconfig.json')).mtimeMs,
    statSync(join(repositoryRoot, 'tsconfig.build.json')).mtimeMs,
    statSync(join(repositoryRoot, 'scripts/bundle.js')).mtimeMs,
  );
  if (!existsSync(agentryEntry) || statSync(agentryEntry).mtimeMs < sources) {
    const result = spawnSync(
      process.execPath,
      [join(repositoryRoot, 'scripts/build.js'), '--changed', 'server'],
      { cwd: repositoryRoot, encoding: 'utf8' },
    );
    if (result.status !== 0) {
      throw new Error(`server build failed:\n${result.stdout}${result.stderr}`);
    }
    // tsc builds incrementally and leaves unchanged outputs as they were: the entry is marked
    // as built now, so that the next process does not compile again.
    const now = new Date();
    utimesSync(agentryEntry, now, now);
  }
  compiled = true;
}

/** Node's arguments to run `agentry <args>` from the compiled command line. */
export function agentryArgs(...args: string[]): string[] {
  ensureServerBuild();
  return [agentryEntry, ...args];
}

/** Children still running; none may outlive the tests or the benchmark, even when they fail. */
const running = new Set<ChildRun>();
process.once('exit', () => {
  for (const run of running) run.kill('SIGTERM');
});

/** A process a test or the benchmark started, with its output kept for error messages. */
export class ChildRun {
  private out = '';
  private err = '';
  private readonly exited: Promise<number | null>;

  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
    /** Whether signals go to the process's group: it and whatever it started. */
    private readonly group = false,
  ) {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (this.out += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.err += chunk));
    running.add(this);
    this.exited = once(child, 'exit').then(([code]) => {
      running.delete(this);
      return code as number | null;
    });
  }

  /** Starts `node <args>` (this Node binary) in `cwd`, the repository root unless given. */
  static node(
    name: string,
    args: string[],
    env: NodeJS.ProcessEnv = process.env,
    cwd = repositoryRoot,
  ): ChildRun {
    return ChildRun.spawn(name, process.execPath, args, env, cwd);
  }

  /** Starts `command <args>` in `cwd`. */
  static spawn(
    name: string,
    command: string,
    args: string[],
    env: NodeJS.ProcessEnv = process.env,
    cwd = repositoryRoot,
    group = false,
  ): ChildRun {
    return new ChildRun(
      name,
      spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: group }),
      group,
    );
  }

  /**
   * Starts `command <args>` in `cwd` as a process group of its own, stopped as one: for a
   * command that starts the program in a child of its own (`npm start`) and does not pass
   * signals on.
   */
  static group(
    name: string,
    command: string,
    args: string[],
    env: NodeJS.ProcessEnv = process.env,
    cwd = repositoryRoot,
  ): ChildRun {
    return ChildRun.spawn(name, command, args, env, cwd, true);
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Waits until stdout matches `pattern`; fails if the process exits or time runs out. */
  async waitForOutput(pattern: RegExp, timeoutMs = 60_000): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const match = pattern.exec(this.out);
      if (match) return match;
      if (this.hasExited()) {
        throw new Error(`${this.name} exited before it was ready:\n${this.output()}`);
      }
      if (Date.now() > deadline) {
        throw new Error(`${this.name} was not ready after ${timeoutMs} ms:\n${this.output()}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** Whether the process has ended. */
  hasExited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** Resolves to the exit code once the process has ended by itself. */
  waitForExit(): Promise<number | null> {
    return this.exited;
  }

  /** Sends `signal` (SIGKILL: a crash) without waiting for the process to end. */
  kill(signal: NodeJS.Signals): void {
    if (!this.group) {
      this.child.kill(signal);
      return;
    }
    try {
      process.kill(-this.child.pid!, signal);
    } catch {
      // The group has ended.
    }
  }

  /** Asks the process to stop (SIGTERM), killing it if it has not exited within the grace. */
  async stop(graceMs = 10_000): Promise<void> {
    if (this.hasExited()) return;
    this.kill('SIGTERM');
    const timer = setTimeout(() => this.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** What the process has written to stdout so far. */
  stdout(): string {
    return this.out;
  }

  /** What the process has written to stderr so far. */
  stderr(): string {
    return this.err;
  }

  output(): string {
    return [this.out, this.err].filter(Boolean).join('\n').trim();
  }
}

export interface ServerProcess {
  url: string;
  /** The key printed on first start; undefined when the store already had users. */
  bootstrapKey: string | undefined;
  child: ChildRun;
  /** Resolves once the process has exited. */
  exited: Promise<number | null>;
}

/**
 * Runs `agentry serve` in a child process on a free loopback port,
 * as an operator would, and resolves once it listens. `storeArgs` chooses the store:
 * `['--database-url', url]` or `['--data-dir', dir]`.
 */
export async function spawnServer(
  storeArgs: string[],
  env: Record<string, string> = {},
): Promise<ServerProcess> {
  const child = ChildRun.node(
    'agentry serve',
    agentryArgs('serve', ...storeArgs, '--port', '0', '--host', '127.0.0.1'),
    {
      ...process.env,
      AGENTRY_LOG_LEVEL: 'info',
      AGENTRY_LOG_FORMAT: 'json',
      AGENTRY_RATE_LIMIT_MAX: '0',
      // Stopped at once: the drain tests set their own grace period.
      AGENTRY_DRAIN_SECONDS: '0',
      ...env,
    },
  );
  const [, url] = await child.waitForOutput(/"address":"(http:\/\/[^"]+)"/, 30_000);
  // The first-start key is printed before the server starts listening.
  return {
    url: url!,
    bootstrapKey: /^\s+(agy_\S+)$/m.exec(child.stdout())?.[1],
    child,
    exited: child.waitForExit(),
  };
}

export interface CommandResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs an `agentry` command to its end without blocking the event loop, for commands that
 * talk to something this process serves (or that run while load goes on).
 */
export async function runAgentryInBackground(
  args: string[],
  env: Record<string, string> = {},
): Promise<CommandResult & { output: string }> {
  const child = ChildRun.node(`agentry ${args[0]}`, agentryArgs(...args), {
    ...process.env,
    ...env,
  });
  const code = await child.waitForExit();
  const output = child.output();
  const stdout = child.stdout();
  return { code, output, stdout, stderr: output.slice(stdout.trim().length) };
}

/** Runs an `agentry` command to its end. */
export function runAgentry(args: string[], env: Record<string, string> = {}): CommandResult {
  const result = spawnSync(process.execPath, agentryArgs(...args), {
    cwd: repositoryRoot,
    encoding: 'utf8',
    env: { ...process.env, ...env },
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}
