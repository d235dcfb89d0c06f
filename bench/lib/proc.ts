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

/** The process and all its descendants (worker processes included). */
export function processTree(pid: number): number[] {
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) {
    const parent = tree[i]!;
    let threads: string[];
    try {
      threads = readdirSync(`/proc/${parent}/task`);
    } catch {
      continue; // exited meanwhile
    }
    for (const thread of threads) {
      try {
        const children = readFileSync(`/proc/${parent}/task/${thread}/children`, 'utf8');
        for (const child of children.trim().split(/\s+/)) if (child) tree.push(Number(child));
      } catch {
        // the thread exited meanwhile
      }
    }
  }
  return tree;
}

/**
 * Seconds this process's main thread has waited for a CPU while other processes held it:
 * subtracting it makes a rate measured on a busy machine fair.
 */
export function mainThreadWaitingSeconds(): number {
  const fields = readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ');
  return Number(fields[1]) / 1e9;
}
