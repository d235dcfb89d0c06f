/** What one peer or upstream did last (docs/federation.md, "Health"), per process. */
export interface TargetHealth {
  healthy: boolean;
  lastOkAt: number | null;
  lastError: string | null;
}

/** The health of each peer and upstream, by URL. */
export class Healths {
  private readonly byUrl = new Map<string, TargetHealth>();

  of(url: string): TargetHealth {
    return this.byUrl.get(url) ?? { healthy: true, lastOkAt: null, lastError: null };
  }

  ok(url: string, at: number): void {
    this.byUrl.set(url, { ...this.of(url), healthy: true, lastOkAt: at });
  }

  failed(url: string, error: string): void {
    this.byUrl.set(url, { ...this.of(url), healthy: false, lastError: error });
  }
}
