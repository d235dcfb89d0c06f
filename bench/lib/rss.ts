import { peakResidentBytes, processTree, residentBytes } from './proc.js';

/**
 * The peak resident memory of a process and everything it forks. The kernel's high-water
 * mark (VmHWM) is exact but per process; summing the tree needs sampling, so both are taken
 * and the larger wins. With `ownOnly`, the process's own high-water mark alone: for a server
 * whose children are not its own (the hosted agents it runs, measured apart).
 */
export class RssSampler {
  private peakTreeBytes = 0;
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pid: number,
    { intervalMs = 100, ownOnly = false }: { intervalMs?: number; ownOnly?: boolean } = {},
  ) {
    if (ownOnly) return;
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  private sample(): void {
    let total = 0;
    for (const pid of processTree(this.pid)) {
      try {
        total += residentBytes(pid);
      } catch {
        // exited between listing and reading
      }
    }
    this.peakTreeBytes = Math.max(this.peakTreeBytes, total);
  }

  /** Stops sampling; call while the process is still running. */
  stop(): number {
    if (this.timer === undefined) return peakResidentBytes(this.pid);
    clearInterval(this.timer);
    this.sample();
    return Math.max(this.peakTreeBytes, peakResidentBytes(this.pid));
  }
}
