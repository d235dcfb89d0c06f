import type { AlmanacEntry } from '../almanac.js';

/** An Almanac entry answered from afar, with the peer or upstream it came from. */
export interface RemoteEntry extends AlmanacEntry {
  home: string;
}

/** The most entries (answers and refusals) one process keeps. */
const CACHE_LIMIT = 10_000;
/** The most senders whose home one process remembers for the delivery trace. */
const HOMES_LIMIT = 10_000;
/** The look-ups answered from afar kept for the operator. */
const LOOKUPS_KEPT = 100;

interface Cached {
  /** Undefined: every upstream said no (a negative answer), for `reason`. */
  entry: RemoteEntry | undefined;
  reason: string;
  until: number;
}

export interface RemoteLookup {
  address: string;
  home: string;
  at: number;
  cached: boolean;
}

/**
 * What this process learnt from afar (docs/federation.md, "Resolving outward"): answers kept
 * until they expire (least recently used dropped first), the home of each address answered
 * (which the delivery trace names), and the last look-ups answered from afar.
 */
export class RemoteRecords {
  private readonly cache = new Map<string, Cached>();
  private readonly homes = new Map<string, string>();
  private readonly lookups: RemoteLookup[] = [];

  /** The answer kept for `key` at `now`, if any. */
  get(key: string, now: number): Cached | undefined {
    const found = this.cache.get(key);
    if (!found) return undefined;
    this.cache.delete(key);
    if (found.until <= now) return undefined;
    // Maps iterate in insertion order: set again, it is the most recently used.
    this.cache.set(key, found);
    return found;
  }

  keep(key: string, value: Cached): void {
    this.cache.delete(key);
    if (this.cache.size >= CACHE_LIMIT) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    this.cache.set(key, value);
  }

  /** An answer from afar was given: its home is remembered, the look-up listed. */
  answered(entry: RemoteEntry, at: number, cached: boolean): void {
    this.homes.delete(entry.address);
    if (this.homes.size >= HOMES_LIMIT) {
      const oldest = this.homes.keys().next().value;
      if (oldest !== undefined) this.homes.delete(oldest);
    }
    this.homes.set(entry.address, entry.home);
    this.lookups.unshift({ address: entry.address, home: entry.home, at, cached });
    if (this.lookups.length > LOOKUPS_KEPT) this.lookups.pop();
  }

  /** Where an address was last answered from, if this process resolved it from afar. */
  homeOf(address: string): string | undefined {
    return this.homes.get(address);
  }

  recentLookups(): readonly RemoteLookup[] {
    return this.lookups;
  }
}
