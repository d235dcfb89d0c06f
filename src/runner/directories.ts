import {
  chmod,
  copyFile,
  lchown,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  rm,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { HostedRunSpec } from '../services/hosting/index.js';
import { bootstrapPath, type AgentPaths } from './sandbox.js';

/**
 * The files of a runner and of its agents, outside their sandboxes: the runner's own directory
 * (the bridges' sockets, the bootstrap), each agent's private directories and its code. The
 * runner may be root: nothing here follows a link an agent left.
 */

/**
 * Longest unix socket path, in bytes: `sun_path` holds 108 with its closing NUL, and Node
 * cuts a longer path silently (the socket would then be made somewhere else).
 */
const MAX_SOCKET_PATH = 107;

/**
 * Makes this runner's own directory, for its bridge sockets and its copy of the bootstrap: a
 * new one with an unguessable name under the system's temporary directory (an agent's own
 * directory, under the hosting directory, may be too deep for a socket's path), that others
 * may pass through but not list.
 */
export async function makeRuntimeDirectory(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'agentry-runtime-'));
  await chmod(dir, 0o711);
  // Slots are small numbers; ten digits is more than any runner has.
  const longest = join(dir, `${'9'.repeat(10)}.sock`);
  if (Buffer.byteLength(longest) > MAX_SOCKET_PATH) {
    await rm(dir, { recursive: true, force: true });
    throw new Error(
      `the temporary directory's path is too long for the agents' sockets (${longest} is over ${MAX_SOCKET_PATH} bytes): point TMPDIR at a shorter one`,
    );
  }
  return dir;
}

/**
 * Copies the bootstrap into the runner's directory, readable by all: the agents' own users
 * must read it, and where Agentry is installed (a home directory, a private checkout) may not
 * be open to them.
 */
export async function stageBootstrap(runtime: string): Promise<string> {
  const path = join(runtime, 'bootstrap.py');
  await copyFile(bootstrapPath(), path);
  await chmod(path, 0o644);
  return path;
}

/**
 * Makes an agent's directories under `dir`: its home (owned by its user, when it has one of its
 * own) and its package directory, in a directory of its own; its bridge's socket is named by
 * its slot in the runner's own directory.
 */
export async function prepareAgentPaths(
  dir: string,
  runtime: string,
  address: string,
  slot: number,
  uid: number | undefined,
): Promise<AgentPaths> {
  if (!/^[a-z0-9]+$/.test(address)) throw new Error(`not an agent address: ${address}`);
  const base = join(dir, address);
  await mkdir(base, { recursive: true, mode: 0o711 });
  await chmod(base, 0o711);
  const paths: AgentPaths = {
    home: join(base, 'home'),
    packages: join(base, 'packages'),
    bridgeSocket: join(runtime, `${slot}.sock`),
  };
  for (const path of [paths.home, paths.packages]) {
    await mkdir(path, { recursive: true, mode: 0o700 });
  }
  await chmod(paths.home, 0o700);
  await chmod(paths.packages, 0o755);
  if (uid !== undefined) {
    await chownTree(paths.home, uid);
    await chownTree(paths.packages, uid);
  }
  return paths;
}

/**
 * Writes the agent's code into its private directory. Names are checked by the hosting
 * service; here no path may pass through a link the agent left (the runner may be root).
 */
export async function writeCodeFiles(
  home: string,
  spec: HostedRunSpec,
  uid: number | undefined,
): Promise<void> {
  for (const file of spec.files) {
    const segments = file.name.split('/');
    if (segments.some((s) => s === '' || s === '.' || s === '..')) {
      throw new Error(`a code file's name is not allowed: ${file.name}`);
    }
    let dir = home;
    for (const segment of segments.slice(0, -1)) {
      dir = join(dir, segment);
      const stat = await lstat(dir).catch(() => undefined);
      if (stat === undefined) await mkdir(dir, { mode: 0o700 });
      else if (!stat.isDirectory())
        await rm(dir, { recursive: true, force: true }).then(() => mkdir(dir, { mode: 0o700 }));
      if (uid !== undefined) await lchown(dir, uid, uid);
    }
    const path = join(home, file.name);
    await rm(path, { recursive: true, force: true });
    await writeFile(path, file.value, { flag: 'wx', mode: 0o600 });
    if (uid !== undefined) await lchown(path, uid, uid);
  }
}

/** Gives a directory and everything in it to a user, following no link. */
async function chownTree(dir: string, uid: number): Promise<void> {
  await lchown(dir, uid, uid);
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await chownTree(path, uid);
    else await lchown(path, uid, uid).catch(() => {});
  }
}
