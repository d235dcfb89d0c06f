import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, lstatSync, readlinkSync } from 'node:fs';
import { open, realpath, stat } from 'node:fs/promises';
import { dirname, join, sep } from 'node:path';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ConfigError } from '../config/index.js';
import {
  findCgroupControllers,
  makeAgentCgroup,
  prlimitCommand,
  removeRunnerCgroups,
  type AgentCgroup,
  type CgroupController,
  type CpuMeasure,
  type SandboxLimits,
} from './limits.js';

/**
 * The command line that runs one hosted agent: resource limits (`prlimit`), the sandbox
 * (bubblewrap), the unprivileged user it runs as and the control groups that hold it (the
 * limits themselves are limits.ts's). What it builds is a plan; the runner spawns it and
 * watches the process.
 */

const run = promisify(execFile);
const MiB = 1024 * 1024;

export type SandboxMode = 'off' | 'bwrap';
export type EgressMode = 'agentry' | 'any';

export interface SandboxSettings {
  mode: SandboxMode;
  egress: EgressMode;
  /** The interpreter agents run with. */
  python: string;
  limits: SandboxLimits;
  /**
   * A runner running as root runs each agent as user `uidBase + slot` (and the same group),
   * so that no agent reads another's files and the process limit counts per agent.
   */
  uidBase: number;
}

/** Where one agent's files are, outside the sandbox. */
export interface AgentPaths {
  /** Its private directory: HOME and working directory, writable. */
  home: string;
  /** Packages installed from its requirements.txt; read-only for the agent. */
  packages: string;
  /** The unix socket through which a sandbox without a network reaches Agentry. */
  bridgeSocket: string;
}

export interface AgentLaunch {
  /** A small number unique among the agents this runner runs at once. */
  slot: number;
  paths: AgentPaths;
  /** Contract variables and secrets. Never on a command line, never seen by the wrappers. */
  env: Record<string, string>;
  /** What Python runs; the bootstrap by default. */
  pythonArgs?: string[];
  /** Installing requirements reaches the package index, whatever the egress setting. */
  network?: boolean;
  /** Installing requirements writes the package directory. */
  writablePackages?: boolean;
}

export interface LaunchPlan {
  file: string;
  args: string[];
  /** The environment of the process spawned (the agent's own under `off`). */
  env: Record<string, string>;
  cwd: string;
  uid: number | undefined;
  gid: number | undefined;
  /** Written to fd 4 and closed: the NUL-separated arguments that carry the agent's environment. */
  argsFd: Buffer | undefined;
  cgroup: AgentCgroup | undefined;
}

/** Paths inside the sandbox. */
export const SANDBOX_HOME = '/agent';
export const SANDBOX_PACKAGES = '/agent-packages';
export const SANDBOX_BRIDGE_SOCKET = '/run/agentry/bridge.sock';
const SANDBOX_BOOTSTRAP = '/run/agentry/bootstrap.py';

/** The bootstrap, shipped beside the compiled code: `hosting/` at the package root. */
export function bootstrapPath(): string {
  // src/runner/sandbox.ts and dist/runner/sandbox.js are both two levels below the root.
  return fileURLToPath(new URL('../../hosting/bootstrap.py', import.meta.url));
}

/** Where the programs that contain an agent are looked for (Debian's packages and the like). */
const SYSTEM_PROGRAM_DIRS = ['/usr/local/bin', '/usr/bin', '/bin', '/usr/local/sbin', '/usr/sbin'];

/** The path of a system program, or undefined when it is not installed. */
function findProgram(name: string): string | undefined {
  return SYSTEM_PROGRAM_DIRS.map((dir) => join(dir, name)).find((path) => existsSync(path));
}

/**
 * What a runner knows of its surroundings, found once at start: the interpreter's prefixes,
 * the programs that contain an agent, whether it runs as root, the control groups it may use.
 */
export class Sandbox {
  private constructor(
    readonly settings: SandboxSettings,
    private readonly prefixes: string[],
    /** The interpreter itself, as it names itself (`sys.executable`). */
    private readonly executable: string,
    private readonly bwrap: string | undefined,
    private readonly prlimit: string | undefined,
    private readonly controllers: CgroupController[],
    /** The bootstrap agents run: a copy the agents' users can read (see `prepare`). */
    private readonly bootstrap: string,
  ) {}

  /**
   * Looks at the machine once. Throws a ConfigError naming the setting when the interpreter
   * does not run or the sandbox asked for is not installed. Without `controlGroups`, none is
   * made even where the runner could: CPU is then sampled and processes counted.
   */
  static async prepare(
    settings: SandboxSettings,
    runnerTag: string,
    {
      controlGroups = true,
      bootstrap = bootstrapPath(),
    }: {
      controlGroups?: boolean;
      /** Where the bootstrap is: by default where it is shipped. */
      bootstrap?: string;
    } = {},
  ): Promise<Sandbox> {
    let prefixes: string[];
    let executable: string;
    try {
      const { stdout } = await run(
        settings.python,
        [
          '-c',
          'import sys; print(sys.executable); print(sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)',
        ],
        { timeout: 20_000, env: { PATH: '/usr/bin:/bin' } },
      );
      const [first, second] = stdout.trim().split('\n');
      executable = first!.trim();
      prefixes = [...new Set((second ?? '').trim().split(/\s+/))].filter((p) => p.startsWith('/'));
    } catch (err) {
      throw new ConfigError(
        `AGENTRY_HOSTING_PYTHON (${settings.python}) must be a Python interpreter this process can run: ${(err as Error).message}`,
      );
    }
    const bwrap = settings.mode === 'bwrap' ? findProgram('bwrap') : undefined;
    if (settings.mode === 'bwrap' && bwrap === undefined) {
      throw new ConfigError(
        'AGENTRY_HOSTING_SANDBOX is bwrap but bubblewrap is not installed (Debian and Ubuntu: apt-get install bubblewrap).',
      );
    }
    const controllers = controlGroups ? await findCgroupControllers(runnerTag) : [];
    return new Sandbox(
      settings,
      prefixes,
      executable,
      bwrap,
      findProgram('prlimit'),
      controllers,
      bootstrap,
    );
  }

  /** Agents run as users of their own: the runner is root and the sandbox is on. */
  get dropsPrivileges(): boolean {
    return this.settings.mode === 'bwrap' && process.getuid?.() === 0;
  }

  get cpuMeasure(): CpuMeasure {
    return this.controllers.some((c) => c.kind === 'cpu') ? 'cgroup' : 'sampling';
  }

  /**
   * How the processes limit is held: by a pids control group, by the agent's own user
   * (RLIMIT_NPROC counts a user's processes), or by the runner counting them.
   */
  get processMeasure(): 'cgroup' | 'user' | 'sampling' {
    if (this.controllers.some((c) => c.kind === 'pids')) return 'cgroup';
    return this.dropsPrivileges && this.prlimit !== undefined ? 'user' : 'sampling';
  }

  uidOf(slot: number): number | undefined {
    return this.dropsPrivileges ? this.settings.uidBase + slot : undefined;
  }

  /**
   * One line for the agent's log saying how it is contained; `cpuWindowMs` is how long the
   * runner lets it stay above its CPU share when no control group holds it.
   */
  describe(cpuWindowMs: number): string {
    const { mode, egress, limits } = this.settings;
    const parts = [
      mode === 'bwrap'
        ? `sandbox bwrap${this.dropsPrivileges ? ', own user' : ''}, egress ${egress === 'agentry' ? 'this Agentry only' : 'any'}`
        : 'sandbox off',
      this.prlimit
        ? `memory ${limits.memoryMb} MiB, open files ${limits.openFiles}`
        : 'memory and open files not limited (prlimit missing)',
      `processes ${limits.processes} (${this.processMeasure === 'sampling' ? 'counted by the runner' : this.processMeasure === 'cgroup' ? 'control group' : 'per-user limit'})`,
      `cpu ${limits.cpuPercent}% (${this.cpuMeasure === 'cgroup' ? 'control group quota' : `lower priority, stopped when above its share for ${Math.round(cpuWindowMs / 1000)} s`})`,
      `disk ${limits.diskMb} MiB`,
    ];
    return `limits: ${parts.join('; ')}`;
  }

  /** Removes this runner's control group directories (each agent's is removed as it ends). */
  async close(): Promise<void> {
    await removeRunnerCgroups(this.controllers);
  }

  /** The plan that starts one agent (or, with `pythonArgs`, one Python command in its place). */
  async plan(launch: AgentLaunch): Promise<LaunchPlan> {
    const { limits, mode } = this.settings;
    const uid = this.uidOf(launch.slot);
    const cgroup = await makeAgentCgroup(this.controllers, launch.slot, uid, limits);
    const chain: string[] = [];
    if (cgroup !== undefined) {
      // The shell joins the groups, then becomes the rest of the line.
      const joins = cgroup.procsFiles.map((file) => `echo $$ > ${file}`).join(' && ');
      chain.push('/bin/sh', '-c', `${joins} && exec "$@"`, 'agentry-agent');
    }
    if (this.cpuMeasure === 'sampling')
      chain.push(findProgram('nice') ?? '/usr/bin/nice', '-n', '10');
    if (this.prlimit !== undefined) {
      chain.push(...prlimitCommand(this.prlimit, limits, this.processMeasure === 'user'));
    }
    const pythonArgs = launch.pythonArgs ?? [mode === 'bwrap' ? SANDBOX_BOOTSTRAP : this.bootstrap];
    const common = {
      PATH: '/usr/local/bin:/usr/bin:/bin',
      LANG: 'C.UTF-8',
      PYTHONUNBUFFERED: '1',
      // glibc reserves 64 MiB of address space per thread arena: under the address-space
      // limit, a few threads would use up the agent's memory without touching it.
      MALLOC_ARENA_MAX: '2',
    };
    if (mode === 'off') {
      const env = {
        ...common,
        ...launch.env,
        HOME: launch.paths.home,
        AGENTRY_PACKAGES: launch.paths.packages,
      };
      const [file, ...args] = [...chain, this.settings.python, ...pythonArgs];
      return {
        file: file!,
        args,
        env,
        cwd: launch.paths.home,
        uid,
        gid: uid,
        argsFd: undefined,
        cgroup,
      };
    }
    const env = {
      ...common,
      ...launch.env,
      HOME: SANDBOX_HOME,
      AGENTRY_PACKAGES: SANDBOX_PACKAGES,
    };
    const network = launch.network === true || this.settings.egress === 'any';
    const bwrapArgs = this.bwrapArguments(
      launch.paths,
      network,
      launch.writablePackages === true,
      env,
    );
    chain.push(this.bwrap!, '--args', '4', this.settings.python, ...pythonArgs);
    const [file, ...args] = chain;
    return {
      file: file!,
      args,
      // The wrappers see no secret: the agent's environment reaches bwrap through fd 4.
      env: { PATH: common.PATH },
      cwd: '/',
      uid,
      gid: uid,
      argsFd: Buffer.from(bwrapArgs.map((arg) => `${arg}\0`).join('')),
      cgroup,
    };
  }

  private bwrapArguments(
    paths: AgentPaths,
    network: boolean,
    writablePackages: boolean,
    env: Record<string, string>,
  ): string[] {
    const { limits } = this.settings;
    const args = [
      '--unshare-user',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--unshare-cgroup-try',
      ...(network ? [] : ['--unshare-net']),
      '--disable-userns',
      '--die-with-parent',
      '--new-session',
      '--hostname',
      'agent',
      '--ro-bind',
      '/usr',
      '/usr',
    ];
    // Merged-/usr systems link these into /usr; others keep them as directories.
    for (const top of ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']) {
      let stat;
      try {
        stat = lstatSync(top);
      } catch {
        continue;
      }
      if (stat.isSymbolicLink()) args.push('--symlink', readlinkSync(top), top);
      else if (stat.isDirectory()) args.push('--ro-bind', top, top);
    }
    args.push('--ro-bind-try', '/etc/ssl', '/etc/ssl');
    args.push('--ro-bind-try', '/etc/ca-certificates', '/etc/ca-certificates');
    if (network) {
      for (const file of [
        '/etc/resolv.conf',
        '/etc/hosts',
        '/etc/nsswitch.conf',
        '/etc/gai.conf',
      ]) {
        args.push('--ro-bind-try', file, file);
      }
    }
    args.push(
      '--proc',
      '/proc',
      '--dev',
      '/dev',
      // Memory the agent may write as files: bounded, and not in its memory limit.
      '--size',
      String(Math.min(limits.diskMb, 16) * MiB),
      '--tmpfs',
      '/dev/shm',
      '--size',
      String(Math.min(limits.diskMb, 64) * MiB),
      '--tmpfs',
      '/tmp',
    );
    // After /tmp: an interpreter installed under it stays in view.
    for (const prefix of this.prefixes) {
      if (prefix === '/usr' || prefix.startsWith('/usr/')) continue;
      args.push('--ro-bind', prefix, prefix);
    }
    args.push(
      '--ro-bind',
      this.bootstrap,
      SANDBOX_BOOTSTRAP,
      '--bind',
      paths.home,
      SANDBOX_HOME,
      writablePackages ? '--bind' : '--ro-bind',
      paths.packages,
      SANDBOX_PACKAGES,
    );
    if (!network) args.push('--ro-bind', paths.bridgeSocket, SANDBOX_BRIDGE_SOCKET);
    // The root the sandbox was built on is read-only once built: nothing written outside
    // the agent's directory and /tmp (whose size is bounded), not even in memory.
    args.push('--remount-ro', '/', '--remount-ro', '/dev', '--chdir', SANDBOX_HOME, '--clearenv');
    for (const [name, value] of Object.entries(env)) args.push('--setenv', name, value);
    args.push('--');
    return args;
  }

  /**
   * Starts the interpreter in the sandbox once, so that a runner that cannot run agents says
   * why at start rather than at each agent's crash.
   */
  async check(paths: AgentPaths): Promise<void> {
    const plan = await this.plan({
      slot: 0,
      paths,
      env: {},
      pythonArgs: ['-c', 'import os; os.listdir(".")'],
      network: true,
    });
    try {
      const child = spawnPlan(plan, 'ignore');
      let stderr = '';
      child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
        if (stderr.length < 4000) stderr += chunk;
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
      clearTimeout(timer);
      if (code !== 0) {
        throw new Error(stderr.trim() || `exited with ${code ?? signal}`);
      }
    } catch (err) {
      const hint = await this.whyNotRun(paths);
      throw new ConfigError(
        `The hosting sandbox cannot start ${this.settings.python}: ${(err as Error).message.replace(/\.$/, '')}` +
          (hint === undefined ? '.' : `; ${hint}`),
      );
    } finally {
      await plan.cgroup?.remove();
    }
  }

  /** Whether the sandbox shows this path: /usr and the top directories, the interpreter's installation. */
  private shows(path: string): boolean {
    const within = (dir: string): boolean => path === dir || path.startsWith(`${dir}${sep}`);
    return (
      ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'].some(within) ||
      this.prefixes.some(within)
    );
  }

  /**
   * What the files say of why the interpreter did not run in the sandbox, said as the end of
   * a sentence, with what to change; undefined when they say nothing.
   */
  private async whyNotRun(paths: AgentPaths): Promise<string | undefined> {
    const { python, uidBase } = this.settings;
    if (this.dropsPrivileges) {
      const real = await realpath(python).catch(() => python);
      for (const path of [python, real, ...this.prefixes, dirname(paths.home)]) {
        const closed = await closedToOthers(path);
        if (closed !== undefined) {
          return `agents run as users ${uidBase} and up, and ${closed}: the interpreter, its installation, AGENTRY_HOSTING_DIR and the directories above them must be readable and searchable by other users.`;
        }
      }
    }
    if (this.shows(python)) return undefined;
    const installation = this.prefixes.join(', ');
    if (await isScript(python)) {
      return `AGENTRY_HOSTING_PYTHON is a script outside the interpreter's installation (${installation}), and the sandbox shows only /usr, that installation and the agent's own files: point AGENTRY_HOSTING_PYTHON at the interpreter itself (${this.executable}), or put the script inside its installation, where what it runs must be too (docs/hosting.md, "Wrapper interpreters").`;
    }
    return `AGENTRY_HOSTING_PYTHON is outside what the sandbox shows (/usr and the interpreter's installation, ${installation}): point it at the interpreter itself (${this.executable}).`;
  }
}

/**
 * The first of a path and the directories above it that other users may not pass through
 * (or, the path itself, read), said as `/root is mode 0700`; undefined when all are open.
 */
async function closedToOthers(path: string): Promise<string | undefined> {
  const parts = path.split(sep).filter(Boolean);
  for (let i = 1; i <= parts.length; i++) {
    const at = `${sep}${parts.slice(0, i).join(sep)}`;
    const info = await stat(at).catch(() => undefined);
    if (info === undefined) return undefined;
    const needed = info.isDirectory() ? 0o001 : i === parts.length ? 0o004 : 0;
    if ((info.mode & needed) !== needed) {
      return `${at} is mode ${(info.mode & 0o777).toString(8).padStart(4, '0')}`;
    }
  }
  return undefined;
}

/** Whether the file starts with `#!`: a script, run by the interpreter its first line names. */
async function isScript(path: string): Promise<boolean> {
  const file = await open(path, 'r').catch(() => undefined);
  if (file === undefined) return false;
  try {
    const { bytesRead, buffer } = await file.read(Buffer.alloc(2), 0, 2, 0);
    return bytesRead === 2 && buffer.toString('latin1') === '#!';
  } finally {
    await file.close();
  }
}

/**
 * Spawns a plan: stdout and stderr piped, fd 3 as given (the agent's channel, or nothing),
 * fd 4 carrying the sandbox's arguments when it has them. The process leads a group of its
 * own, so that a signal to the group reaches what it forked.
 */
export function spawnPlan(plan: LaunchPlan, fd3: 'pipe' | 'ignore'): ChildProcess {
  const child = spawn(plan.file, plan.args, {
    env: plan.env,
    cwd: plan.cwd,
    uid: plan.uid,
    gid: plan.gid,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe', fd3, plan.argsFd === undefined ? 'ignore' : 'pipe'],
  });
  const argsPipe = child.stdio[4] as Writable | null;
  if (plan.argsFd !== undefined && argsPipe) {
    // A sandbox that failed to start closes its end early: nothing more to say to it.
    argsPipe.on('error', () => {});
    argsPipe.end(plan.argsFd);
  }
  return child;
}
