import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const entry = join(root, 'src/cli/main.ts');

export interface ServerProcess {
  url: string;
  /** The key printed on first start; undefined when the store already had users. */
  bootstrapKey: string | undefined;
  child: ChildProcessWithoutNullStreams;
  /** Resolves once the process has exited. */
  exited: Promise<number | null>;
}

/**
 * Runs `agentry serve` in a child process on a free loopback port, as an operator would,
 * and resolves once it listens. `storeArgs` chooses the store: `['--database-url', url]` or
 * `['--data-dir', dir]`.
 */
export async function spawnServer(
  storeArgs: string[],
  env: Record<string, string> = {},
): Promise<ServerProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', entry, 'serve', ...storeArgs, '--port', '0', '--host', '127.0.0.1'],
    {
      cwd: root,
      env: {
        ...process.env,
        AGENTRY_LOG_LEVEL: 'info',
        AGENTRY_LOG_FORMAT: 'json',
        AGENTRY_RATE_LIMIT_MAX: '0',
        ...env,
      },
    },
  );
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), 30_000);
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const listening = /"address":"(http:\/\/[^"]+)"/.exec(out)?.[1];
      if (listening) {
        clearTimeout(timer);
        resolve(listening);
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${out}`));
    });
  });
  // The first-start key is printed before the server starts listening.
  return { url, bootstrapKey: /^\s+(agy_\S+)$/m.exec(out)?.[1], child, exited };
}
