import { readFile, readdir } from 'node:fs/promises';

/**
 * The machine's processes as /proc shows them: enough to count an agent's processes and
 * threads, add up its CPU time and signal all of it.
 */

/** Clock ticks a second, as /proc counts CPU time (USER_HZ: 100 on Linux). */
export const CLOCK_TICKS = 100;

export interface ProcessEntry {
  ppid: number;
  threads: number;
  /** CPU time used, its own and its waited-for children's, in clock ticks. */
  ticks: number;
}

export type ProcessTable = Map<number, ProcessEntry>;

/** Every process on the machine, from /proc. */
export async function readProcessTable(): Promise<ProcessTable> {
  const table: ProcessTable = new Map();
  const names = await readdir('/proc').catch(() => [] as string[]);
  await Promise.all(
    names
      .filter((name) => /^\d+$/.test(name))
      .map(async (name) => {
        const text = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => undefined);
        if (text === undefined) return;
        // The command name is in parentheses and may hold spaces or parentheses itself.
        const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
        const field = (n: number): number => Number(fields[n - 3]);
        table.set(Number(name), {
          ppid: field(4),
          threads: field(20),
          ticks: field(14) + field(15) + field(16) + field(17),
        });
      }),
  );
  return table;
}

/** Each table's processes by parent, made once per table (a runner asks it for every agent). */
const childIndexes = new WeakMap<ProcessTable, Map<number, number[]>>();

function childrenOf(table: ProcessTable): Map<number, number[]> {
  let children = childIndexes.get(table);
  if (children === undefined) {
    children = new Map();
    for (const [pid, entry] of table) {
      const list = children.get(entry.ppid);
      if (list) list.push(pid);
      else children.set(entry.ppid, [pid]);
    }
    childIndexes.set(table, children);
  }
  return children;
}

export function descendants(root: number, table: ProcessTable): number[] {
  const children = childrenOf(table);
  const found: number[] = [];
  const pending = table.has(root) ? [root] : [];
  while (pending.length > 0) {
    const pid = pending.pop()!;
    found.push(pid);
    pending.push(...(children.get(pid) ?? []));
  }
  return found;
}

/**
 * Signals the process, its group, everything below it and everything in `grouped` (its
 * control groups). With `sparing`, the process itself and its group are left out: a sandbox
 * whose death kills what runs in it at once (bubblewrap) must outlive a polite signal.
 */
export function signalAll(
  pid: number,
  table: ProcessTable,
  grouped: number[],
  signal: NodeJS.Signals,
  sparing = false,
): void {
  const targets = new Set([...descendants(pid, table), ...grouped]);
  if (sparing) targets.delete(pid);
  else {
    targets.add(pid);
    try {
      process.kill(-pid, signal);
    } catch {
      // no group left
    }
  }
  for (const target of targets) {
    try {
      process.kill(target, signal);
    } catch {
      // already gone
    }
  }
}
