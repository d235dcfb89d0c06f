import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { ChildRun, repositoryRoot } from './process.js';

/**
 * Network namespaces for the tests in which two services must not share a loopback: each
 * namespace has an address of its own on a bridge in the root namespace (which has the
 * gateway address, so the test process reaches each of them), and nothing else: no default
 * route, so whatever a process inside tries to reach beyond the bridge fails at once. The
 * namespaces reach each other over the bridge, with no forwarding turned on anywhere.
 *
 * Making them needs root and `ip netns`; {@link namespacesUnavailable} says why a suite skips.
 * Every name carries a random tag, so that runs at the same time do not clash.
 */

/** Why namespaces cannot be made here, or false when they can. */
export function namespacesUnavailable(): string | false {
  if (process.getuid?.() !== 0) return 'network namespaces need root (run the tests as root)';
  const probe = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  if (probe.error !== undefined) return `ip cannot be run (${probe.error.message})`;
  if (probe.status !== 0) return `ip netns is unavailable: ${probe.stderr.trim()}`;
  return false;
}

/** Runs `ip <args>`; throws with what it said when it fails. */
function ip(...args: string[]): string {
  const result = spawnSync('ip', args, { encoding: 'utf8' });
  if (result.error !== undefined) throw result.error;
  if (result.status !== 0) {
    throw new Error(`ip ${args.join(' ')} failed: ${result.stderr.trim()}`);
  }
  return result.stdout;
}

/** Runs `ip <args>` and ignores a failure (for taking down what may be half made). */
function ipQuietly(...args: string[]): void {
  spawnSync('ip', args, { stdio: 'ignore' });
}

/** What {@link NetworkNamespace.fetch} sends. */
export interface FetchInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  timeoutMs?: number;
}

/** What {@link NetworkNamespace.fetch} got: an answer, or the code of the error instead. */
export type FetchedInside = { status: number; text: string } | { error: string };

/** Run as `node -e FETCH_SCRIPT url init-json`: prints one JSON line. */
const FETCH_SCRIPT = `
const [url, init] = [process.argv[1], JSON.parse(process.argv[2])];
fetch(url, { ...init, signal: AbortSignal.timeout(init.timeoutMs ?? 10000) }).then(
  async (res) => console.log(JSON.stringify({ status: res.status, text: await res.text() })),
  (err) => console.log(JSON.stringify({ error: err.cause?.code ?? err.name })),
);
`;

/** One namespace of a {@link NamespaceNetwork}. */
export class NetworkNamespace {
  constructor(
    readonly name: string,
    /** Its address on the bridge, e.g. 10.77.140.2. */
    readonly address: string,
  ) {}

  /** Starts `command <args>` inside the namespace (in `cwd`, the repository root unless given). */
  spawn(
    label: string,
    command: string,
    args: string[],
    env: NodeJS.ProcessEnv = process.env,
    cwd = repositoryRoot,
  ): ChildRun {
    return ChildRun.spawn(label, 'ip', ['netns', 'exec', this.name, command, ...args], env, cwd);
  }

  /** The command line prefix that runs a program inside the namespace. */
  launcher(): string[] {
    return ['ip', 'netns', 'exec', this.name];
  }

  /** Runs `command <args>` inside the namespace to its end. */
  run(command: string, ...args: string[]): string {
    return ip('netns', 'exec', this.name, command, ...args);
  }

  /**
   * Fetches `url` from inside the namespace (a Node process of its own there), for what only
   * a caller in the namespace may reach, such as its loopback. Answers the status and the
   * body's text, or the error's code when no answer came.
   */
  async fetch(url: string, init: FetchInit = {}): Promise<FetchedInside> {
    const probe = this.spawn('fetch inside a namespace', process.execPath, [
      '-e',
      FETCH_SCRIPT,
      url,
      JSON.stringify(init),
    ]);
    await probe.waitForExit();
    const line = probe.stdout().trim().split('\n').pop() ?? '';
    if (!line.startsWith('{'))
      throw new Error(`the fetch inside ${this.name} failed:\n${probe.output()}`);
    return JSON.parse(line) as FetchedInside;
  }

  /** The ids of the processes still running inside the namespace. */
  pids(): number[] {
    const result = spawnSync('ip', ['netns', 'pids', this.name], { encoding: 'utf8' });
    return (result.stdout ?? '')
      .split('\n')
      .map((line) => Number(line.trim()))
      .filter((pid) => Number.isInteger(pid) && pid > 0);
  }
}

/** Namespaces on one bridge; {@link destroy} takes all of it down, and so does the exit. */
export interface NamespaceNetwork {
  /** The root namespace's address on the bridge (the address the test process calls from). */
  gateway: string;
  namespaces: NetworkNamespace[];
  /** Kills what still runs inside the namespaces, deletes them and the bridge. */
  destroy(): void;
}

/** A /24 of 10.77.0.0/16 that no interface of the root namespace has an address in. */
function unusedSubnet(): string {
  const used = ip('-4', '-o', 'addr', 'show');
  for (let attempt = 0; attempt < 50; attempt++) {
    const subnet = `10.77.${1 + Math.floor(Math.random() * 254)}`;
    if (!used.includes(` ${subnet}.`)) return subnet;
  }
  throw new Error('no unused 10.77.x.0/24 subnet for the test namespaces');
}

/**
 * Makes `count` namespaces, the i-th at 10.77.S.(i+2)/24 on a new bridge at 10.77.S.1, each
 * with its loopback up. A failure halfway takes down what was made.
 */
export function createNamespaceNetwork(count: number): NamespaceNetwork {
  const tag = randomBytes(3).toString('hex');
  const bridge = `agyb${tag}`;
  const subnet = unusedSubnet();
  const namespaces: NetworkNamespace[] = [];
  let destroyed = false;
  const destroy = (): void => {
    if (destroyed) return;
    destroyed = true;
    process.off('exit', destroy);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    for (const namespace of namespaces) {
      for (const pid of namespace.pids()) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // It ended meanwhile.
        }
      }
      // Deleting a namespace deletes the end of its veth pair inside, and so the pair.
      ipQuietly('netns', 'delete', namespace.name);
    }
    ipQuietly('link', 'delete', bridge);
  };
  // A test process that ends before its hooks run (it fails, or is told to stop) still takes
  // the network down; a signal is raised again once that is done, to end it as it would have.
  const onSignal = (signal: NodeJS.Signals): void => {
    destroy();
    process.kill(process.pid, signal);
  };
  process.on('exit', destroy);
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    ip('link', 'add', bridge, 'type', 'bridge');
    ip('addr', 'add', `${subnet}.1/24`, 'dev', bridge);
    ip('link', 'set', bridge, 'up');
    for (let i = 0; i < count; i++) {
      const namespace = new NetworkNamespace(`agentry-${tag}-${i}`, `${subnet}.${i + 2}`);
      const outside = `agy${tag}h${i}`;
      const inside = `agy${tag}n${i}`;
      ip('netns', 'add', namespace.name);
      namespaces.push(namespace);
      ip('link', 'add', outside, 'type', 'veth', 'peer', 'name', inside);
      ip('link', 'set', inside, 'netns', namespace.name);
      ip('link', 'set', outside, 'master', bridge);
      ip('link', 'set', outside, 'up');
      namespace.run('ip', 'addr', 'add', `${namespace.address}/24`, 'dev', inside);
      namespace.run('ip', 'link', 'set', inside, 'up');
      namespace.run('ip', 'link', 'set', 'lo', 'up');
    }
  } catch (err) {
    destroy();
    throw err;
  }
  return { gateway: `${subnet}.1`, namespaces, destroy };
}
