import { readdirSync, readFileSync } from 'node:fs';

/**
 * Readers of Linux /proc: CPU time and resident memory of processes, and busy time of the
 * whole machine. The benchmarks run on Linux (the numbers are only comparable there).
 */

/** USER_HZ, the unit of /proc CPU times; fixed at 100 in the kernel's user-space ABI. */
const TICKS_PER_SECOND = 100;

/** CPU seconds (user + system) a process has used so far. */
export function processCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may contain spaces; the fields after its ')' are fixed.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return (utime + stime) / TICKS_PER_SECOND;
}

/** The executable's name (at most 15 characters), e.g. "postgres". */
export function processName(pid: number): string {
  return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
}

function statusKiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
  return match ? Number(match[1]) : 0;
}

/** Resident memory now, in bytes. */
export function residentBytes(pid: number): number {
  return statusKiB(pid, 'VmRSS') * 1024;
}

/** The highest resident memory the process has had, in bytes. */
export function peakResidentBytes(pid: number): number {
  return statusKiB(pid, 'VmHWM') * 1024;
}

/** The processes `pid` started that are still running (its children, not theirs). */
export function childProcesses(pid: number): number[] {
  let threads: string[];
  try {
    threads = readdirSync(`/proc/${pid}/task`);
  } catch {
    return []; // exited meanwhile
  }
  const children: number[] = [];
  for (const thread of threads) {
    try {
      const listed = readFileSync(`/proc/${pid}/task/${thread}/children`, 'utf8');
      for (const child of listed.trim().split(/\s+/)) if (child) children.push(Number(child));
    } catch {
      // the thread exited meanwhile
    }
  }
  return children;
}

/** The process and all its descendants (worker processes included). */
export function processTree(pid: number): number[] {
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) tree.push(...childProcesses(tree[i]!));
  return tree;
}

/**
 * Proportional set size in bytes: the process's resident memory with each page it shares
 * counted as its share (a page five processes map counts a fifth). Summed over processes, it
 * is the memory they use together, where their RSS counts shared pages once per process.
 */
export function proportionalBytes(pid: number): number {
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const match = /^Pss:\s+(\d+) kB/m.exec(rollup);
  return match ? Number(match[1]) * 1024 : 0;
}

/**
 * Seconds this process's main thread has waited for a CPU while other processes held it:
 * subtracting it makes a rate measured on a busy machine fair.
 */
export function mainThreadWaitingSeconds(): number {
  const fields = readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ');
  return Number(fields[1]) / 1e9;
}
