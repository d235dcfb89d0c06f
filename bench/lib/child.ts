import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

/** Where package.json is: child processes run there. */
export const repositoryRoot = fileURLToPath(new URL('../../', import.meta.url));

/** Children still running; none may outlive the benchmark, even when it fails. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGTERM');
});

/** A process the benchmark started, with its output kept for error messages. */
export class ChildRun {
  private stdout = '';
  private stderr = '';
  private readonly exited: Promise<number | null>;

  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
  ) {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (this.stdout += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    running.add(child);
    this.exited = once(child, 'exit').then(([code]) => {
      running.delete(child);
      return code as number | null;
    });
  }

  /** Starts `node <args>` (this Node binary) in the repository root. */
  static node(name: string, args: string[], env: NodeJS.ProcessEnv = process.env): ChildRun {
    const child = spawn(process.execPath, args, {
      cwd: repositoryRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return new ChildRun(name, child);
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Waits until stdout matches `pattern`; fails if the process exits or time runs out. */
  async waitForOutput(pattern: RegExp, timeoutMs = 60_000): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const match = pattern.exec(this.stdout);
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

  /** Asks the process to stop (SIGTERM), killing it if it has not exited within the grace. */
  async stop(graceMs = 10_000): Promise<void> {
    if (this.hasExited()) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  output(): string {
    return [this.stdout, this.stderr].filter(Boolean).join('\n').trim();
  }
}
