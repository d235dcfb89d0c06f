import type { Store } from '../../src/store/index.js';
import type { DialectName } from '../../src/store/index.js';
import type { Ceilings } from '../ceilings/index.js';
import type { SeedOptions } from '../lib/seed.js';
import type { LoadProfile } from '../lib/load.js';
import type { Measure } from '../lib/report.js';
import type { RunningService } from '../lib/server.js';

export interface ScenarioContext {
  dialect: DialectName;
  /** A server started for this scenario alone, over an empty database. */
  service: RunningService;
  /** The server's database, opened from the benchmark process for seeding (on first use). */
  store(): Store;
  /**
   * Writes `count` messages for `addresses` straight into the server's database, with the
   * seeding code of the build under test (so that a compare against an older build writes
   * the rows its schema has).
   */
  seedMessages(options: SeedOptions): Promise<void>;
  profile: LoadProfile;
  /** The ceilings measured earlier in this run (the storage one is this dialect's). */
  ceilings: Ceilings;
}

/**
 * One part of `npm run bench`. It runs once per store, each time against a fresh server,
 * and returns its measures; the harness adds the server's peak memory (with the processes it
 * starts, unless `ownMemoryOnly`).
 */
export interface Scenario {
  name: string;
  /** AGENTRY_* settings the server needs for this scenario (rate limits are already off). */
  settings?: Record<string, string>;
  /**
   * Makes what the scenario's server needs before it starts (files, an interpreter) and
   * answers the AGENTRY_* settings that name them, added to `settings`. Called before each of
   * the scenario's servers starts; what it makes may be kept for the rest of the run.
   */
  prepare?(): Promise<Record<string, string>>;
  /**
   * The processes the server starts are not its own (the hosted agents it runs, which the
   * scenario measures apart): its peak memory is its process's alone.
   */
  ownMemoryOnly?: boolean;
  /**
   * Why the scenario cannot run on this machine (something it needs is not installed), or
   * undefined when it can: a scenario skipped is reported with the run's other skips.
   */
  skip?(): string | undefined;
  run(ctx: ScenarioContext): Promise<Measure[]>;
}
