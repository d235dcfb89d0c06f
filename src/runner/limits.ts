import { chown, lstat, mkdir, readFile, readdir, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CLOCK_TICKS, descendants, type ProcessTable } from './processes.js';

/**
 * How a hosted agent is held to its limits: by the kernel where it can (control groups for its
 * CPU share and processes, `prlimit` for memory, open files and the size of a file), and by the
 * runner watching it otherwise (its processes counted, its CPU time sampled) and always for its
 * private directory, whose size no kernel limit bounds.
 */

const MiB = 1024 * 1024;

export interface SandboxLimits {
  /** Address space of each process, in MiB. */
  memoryMb: number;
  /** Share of one core the agent may use, in percent. */
  cpuPercent: number;
  /** Processes and threads the agent may have at once. */
  processes: number;
  openFiles: number;
  /** Size of the private directory (and so of any one file), in MiB. */
  diskMb: number;
}

/** How the CPU share is held. */
export type CpuMeasure = 'cgroup' | 'sampling';

// ---- Control groups ----------------------------------------------------------------------

/**
 * One agent's control groups: one directory per controller in use (cpu, pids), made before
 * it starts and removed once it has ended. The process that starts the agent writes itself
 * into each (the files are the agent user's), so that everything it forks is held from the
 * first instruction.
 */
export class AgentCgroup {
  constructor(readonly dirs: string[]) {}

  get procsFiles(): string[] {
    return this.dirs.map((dir) => join(dir, 'cgroup.procs'));
  }

  /** Every process in the group (the union over the controllers). */
  async pids(): Promise<number[]> {
    const pids = new Set<number>();
    for (const file of this.procsFiles) {
      const text = await readFile(file, 'utf8').catch(() => '');
      for (const line of text.split('\n')) if (line !== '') pids.add(Number(line));
    }
    return [...pids];
  }

  /** Removes the directories; a group with processes left is killed first. */
  async remove(): Promise<void> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const pids = await this.pids();
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      if (pids.length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    for (const dir of this.dirs) await rmdir(dir).catch(() => {});
  }
}

export interface CgroupController {
  kind: 'cpu' | 'pids';
  /** The directory under which this runner makes one per agent. */
  base: string;
  version: 1 | 2;
}

/** Finds the cpu and pids controllers this process may make groups in. */
export async function findCgroupControllers(runnerTag: string): Promise<CgroupController[]> {
  const mounts = await readFile('/proc/mounts', 'utf8').catch(() => '');
  const found: CgroupController[] = [];
  for (const line of mounts.split('\n')) {
    const [, path, type, options] = line.split(' ');
    if (path === undefined || options === undefined) continue;
    const opts = options.split(',');
    const kinds: ('cpu' | 'pids')[] = [];
    if (type === 'cgroup' && opts.includes('cpu')) kinds.push('cpu');
    if (type === 'cgroup' && opts.includes('pids')) kinds.push('pids');
    if (type === 'cgroup2') {
      const available = await readFile(join(path, 'cgroup.controllers'), 'utf8').catch(() => '');
      const names = available.trim().split(/\s+/);
      if (names.includes('cpu')) kinds.push('cpu');
      if (names.includes('pids')) kinds.push('pids');
    }
    for (const kind of kinds) {
      if (found.some((c) => c.kind === kind)) continue;
      const base = join(path, runnerTag);
      try {
        await mkdir(base, { recursive: true });
        if (type === 'cgroup2') {
          await writeFile(join(path, 'cgroup.subtree_control'), `+${kind}`);
          await writeFile(join(base, 'cgroup.subtree_control'), `+${kind}`);
        }
        found.push({ kind, base, version: type === 'cgroup2' ? 2 : 1 });
      } catch {
        await rmdir(base).catch(() => {});
      }
    }
  }
  return found;
}

/** Makes an agent's control groups, owned by its user, with its limits; none without controllers. */
export async function makeAgentCgroup(
  controllers: CgroupController[],
  slot: number,
  uid: number | undefined,
  limits: SandboxLimits,
): Promise<AgentCgroup | undefined> {
  if (controllers.length === 0) return undefined;
  const dirs: string[] = [];
  const { cpuPercent, processes } = limits;
  for (const controller of controllers) {
    const dir = join(controller.base, `agent-${slot}`);
    await mkdir(dir, { recursive: true });
    if (controller.kind === 'cpu') {
      const period = 100_000;
      const quota = Math.max(1000, Math.round((period * cpuPercent) / 100));
      if (controller.version === 2) await writeFile(join(dir, 'cpu.max'), `${quota} ${period}`);
      else {
        await writeFile(join(dir, 'cpu.cfs_period_us'), String(period));
        await writeFile(join(dir, 'cpu.cfs_quota_us'), String(quota));
      }
    } else {
      await writeFile(join(dir, 'pids.max'), String(processes));
    }
    if (uid !== undefined) await chown(join(dir, 'cgroup.procs'), uid, uid);
    dirs.push(dir);
  }
  return new AgentCgroup(dirs);
}

/** Removes a runner's control group directories (each agent's is removed as it ends). */
export async function removeRunnerCgroups(controllers: CgroupController[]): Promise<void> {
  for (const controller of controllers) {
    const children = await readdir(controller.base).catch(() => [] as string[]);
    for (const child of children) {
      if (child.startsWith('agent-')) {
        await new AgentCgroup([join(controller.base, child)]).remove();
      }
    }
    await rmdir(controller.base).catch(() => {});
  }
}

// ---- Resource limits of each process (prlimit) -------------------------------------------

/**
 * The `prlimit` command that starts what follows it under the agent's limits: its memory, open
 * files and file size, no core dumps and, when the agent has a user of its own (`perUser`), its
 * processes.
 */
export function prlimitCommand(prlimit: string, limits: SandboxLimits, perUser: boolean): string[] {
  const bytes = (mb: number): number => mb * MiB;
  const command = [
    prlimit,
    `--as=${bytes(limits.memoryMb)}`,
    `--nofile=${limits.openFiles}`,
    `--fsize=${bytes(limits.diskMb)}`,
    '--core=0',
  ];
  if (perUser) command.push(`--nproc=${limits.processes}`);
  return command;
}

// ---- What the runner watches -------------------------------------------------------------

/** Lines that say a process ran out of memory (under RLIMIT_AS, an allocation fails). */
const OUT_OF_MEMORY = /\bMemoryError\b|Cannot allocate memory|std::bad_alloc|out of memory/i;
/** Entries of a private directory looked at, at most, when measuring it. */
const MAX_DISK_ENTRIES = 100_000;

/** The threads and the CPU time (in clock ticks) of a process and everything below it. */
export function treeUse(pid: number, table: ProcessTable): { tasks: number; ticks: number } {
  let tasks = 0;
  let ticks = 0;
  for (const p of descendants(pid, table)) {
    const entry = table.get(p)!;
    tasks += entry.threads;
    ticks += entry.ticks;
  }
  return { tasks, ticks };
}

/** Why an agent with this many processes and threads is stopped, or undefined. */
export function processesProblem(tasks: number, limits: SandboxLimits): string | undefined {
  const { processes } = limits;
  return tasks >= processes ? `too many processes (the limit is ${processes})` : undefined;
}

/**
 * An agent's CPU time sampled over a sliding window, where no control group holds its share: an
 * agent above its share (with a tenth to spare) on average over the window is stopped, once it
 * has run that long.
 */
export class CpuSamples {
  private samples: { at: number; ticks: number }[] = [];

  constructor(
    private readonly windowMs: number,
    private readonly cpuPercent: number,
  ) {}

  /** Adds a sample (`now` and `startedAt` by `performance.now()`); answers why it is stopped. */
  add(now: number, ticks: number, startedAt: number): string | undefined {
    const { windowMs, cpuPercent, samples } = this;
    samples.push({ at: now, ticks });
    while (samples.length > 1 && now - samples[0]!.at > windowMs) samples.shift();
    const first = samples[0]!;
    if (now - startedAt >= windowMs && now - first.at >= windowMs * 0.9) {
      const usedMs = ((ticks - first.ticks) * 1000) / CLOCK_TICKS;
      const percent = (usedMs / (now - first.at)) * 100;
      if (percent > cpuPercent * 1.1) {
        return `cpu limit (${Math.round(percent)}% of a core for ${Math.round(windowMs / 1000)} s; the share is ${cpuPercent}%)`;
      }
    }
    return undefined;
  }
}

/** Measures an agent's private directory: why it is stopped, or undefined within its limit. */
export async function diskProblem(
  home: string,
  limits: SandboxLimits,
): Promise<string | undefined> {
  const limit = limits.diskMb * MiB;
  const { bytes, entries } = await directorySize(home, MAX_DISK_ENTRIES);
  if (entries >= MAX_DISK_ENTRIES) return `disk limit (more than ${MAX_DISK_ENTRIES} files)`;
  if (bytes > limit) {
    return `disk limit (${(bytes / 1024 / 1024).toFixed(1)} MiB in its directory; the limit is ${limits.diskMb} MiB)`;
  }
  return undefined;
}

/**
 * The limit a process that ended went beyond, as its end shows it: the signal for a file grown
 * past the limit, or its last error lines for memory it could not have. Undefined otherwise.
 */
export function limitInExit(
  signal: NodeJS.Signals | null,
  stderrTail: readonly string[],
): string | undefined {
  if (signal === 'SIGXFSZ') return 'disk limit (a file grew beyond it)';
  if (stderrTail.some((line) => OUT_OF_MEMORY.test(line))) return 'memory limit';
  return undefined;
}

/** Bytes used under a directory (each file's size or its blocks, whichever is more). */
async function directorySize(
  dir: string,
  maxEntries: number,
): Promise<{ bytes: number; entries: number }> {
  let bytes = 0;
  let entries = 0;
  const pending = [dir];
  while (pending.length > 0 && entries < maxEntries) {
    const current = pending.pop()!;
    const names = await readdir(current).catch(() => [] as string[]);
    for (const name of names) {
      entries += 1;
      if (entries >= maxEntries) break;
      const path = join(current, name);
      const stat = await lstat(path).catch(() => undefined);
      if (stat === undefined) continue;
      bytes += Math.max(stat.size, stat.blocks * 512);
      if (stat.isDirectory()) pending.push(path);
    }
  }
  return { bytes, entries };
}
