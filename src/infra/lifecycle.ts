/**
 * Where a serving process stands in its life: serving, or draining towards its exit. The
 * readiness route and the HTTP layer read it; the server sets it when told to stop.
 */
export class Lifecycle {
  private stopping = false;

  /** True from the moment the process was told to stop. */
  get draining(): boolean {
    return this.stopping;
  }

  startDraining(): void {
    this.stopping = true;
  }
}
