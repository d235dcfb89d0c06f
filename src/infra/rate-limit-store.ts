import { createRequire } from 'node:module';
import type { FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';

/**
 * Rate-limit counters shared by every replica, in Redis, with the process's own counters as
 * the fallback: while Redis does not answer, each replica limits on its own (a client may
 * then get up to N times its allowance across N replicas) rather than refusing requests.
 * The counting itself is the rate-limit plugin's: its Redis store (one script, atomic across
 * replicas) and its in-memory store.
 */

interface Counter {
  current: number;
  ttl: number;
}
type Callback = (error: Error | null, result?: Counter) => void;

/** The store interface as the plugin calls it (its published types omit the last arguments). */
interface PluginStore {
  incr(key: string, callback: Callback, timeWindow: number, max: number): void;
  child(routeOptions: unknown): PluginStore;
}

/** The settings the plugin hands a store's constructor. */
interface StoreParams {
  continueExceeding?: boolean;
  exponentialBackoff?: boolean;
}

type PluginRedisStore = new (
  continueExceeding: boolean,
  exponentialBackoff: boolean,
  redis: Redis,
  key: string,
) => PluginStore;
type PluginLocalStore = new (
  continueExceeding: boolean,
  exponentialBackoff: boolean,
  cache?: number,
) => PluginStore;

const require = createRequire(import.meta.url);
const RedisStore = require('@fastify/rate-limit/store/RedisStore.js') as PluginRedisStore;
const LocalStore = require('@fastify/rate-limit/store/LocalStore.js') as PluginLocalStore;

/** How long a request waits for Redis before it is counted locally instead. */
const COMMAND_TIMEOUT_MS = 250;
/** How long a starting server waits for Redis before it serves with local counters. */
const CONNECT_WAIT_MS = 2000;

export interface SharedRateLimitsOptions {
  url: string;
  /** Prepended to every key, so that several deployments (or tests) can share one Redis. */
  keyPrefix: string;
  logger: Logger;
}

/** Observes whether the counters are shared right now, and says so in the log when that changes. */
class OutageReporter {
  private degraded = false;

  constructor(private readonly logger: Logger) {}

  failed(err: unknown): void {
    if (this.degraded) return;
    this.degraded = true;
    this.logger.warn(
      { err },
      'rate limits: Redis does not answer; each replica counts for itself until it does',
    );
  }

  succeeded(): void {
    if (!this.degraded) return;
    this.degraded = false;
    this.logger.info('rate limits: Redis answers again; counters are shared');
  }
}

/** A store the plugin instantiates: Redis first, local counters when Redis fails. */
class FallbackStore implements PluginStore {
  constructor(
    private readonly shared: PluginStore,
    private readonly local: PluginStore,
    private readonly reporter: OutageReporter,
  ) {}

  incr(key: string, callback: Callback, timeWindow: number, max: number): void {
    const countLocally = (): void => this.local.incr(key, callback, timeWindow, max);
    this.shared.incr(
      key,
      (err, result) => {
        if (err || !result) {
          this.reporter.failed(err);
          countLocally();
          return;
        }
        this.reporter.succeeded();
        callback(null, result);
      },
      timeWindow,
      max,
    );
  }

  child(routeOptions: unknown): FallbackStore {
    return new FallbackStore(
      this.shared.child(routeOptions),
      this.local.child(routeOptions),
      this.reporter,
    );
  }
}

/**
 * The Redis connection behind shared rate limits, and the store class the plugin takes. The
 * Redis client is loaded on connect, so that processes without Redis never load it.
 */
export class SharedRateLimits {
  private readonly reporter: OutageReporter;
  private redis: Redis | undefined;

  constructor(private readonly options: SharedRateLimitsOptions) {
    this.reporter = new OutageReporter(options.logger);
  }

  /**
   * Connects, waiting a little: a server that starts while Redis is down serves anyway, with
   * local counters, and shares them once Redis answers.
   */
  async connect(): Promise<void> {
    const { Redis } = await import('ioredis');
    const redis = new Redis(this.options.url, {
      // Fail at once while disconnected (and fall back) instead of queueing requests.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: COMMAND_TIMEOUT_MS,
      connectTimeout: CONNECT_WAIT_MS,
      // Keep trying to reconnect, at most every 2 s.
      retryStrategy: (attempt) => Math.min(attempt * 100, 2000),
      lazyConnect: true,
    });
    // Connection errors are reported through the requests they fail; without a listener
    // ioredis would print each one.
    redis.on('error', (err: unknown) => this.reporter.failed(err));
    redis.on('ready', () => this.reporter.succeeded());
    this.redis = redis;
    try {
      await Promise.race([
        redis.connect(),
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error('Redis connect timed out')), CONNECT_WAIT_MS).unref(),
        ),
      ]);
    } catch (err) {
      this.reporter.failed(err);
    }
  }

  /** The `store` option of the rate-limit plugin. */
  storeClass(): FastifyRateLimitStoreCtor {
    if (!this.redis) throw new Error('shared rate limits are used before they connect');
    const redis: Redis = this.redis;
    const reporter = this.reporter;
    const { keyPrefix } = this.options;
    const Store = class extends FallbackStore {
      constructor(params: StoreParams) {
        const continueExceeding = params.continueExceeding ?? false;
        const exponentialBackoff = params.exponentialBackoff ?? false;
        super(
          new RedisStore(continueExceeding, exponentialBackoff, redis, `${keyPrefix}rate:`),
          new LocalStore(continueExceeding, exponentialBackoff),
          reporter,
        );
      }
    };
    return Store as unknown as FastifyRateLimitStoreCtor;
  }

  async close(): Promise<void> {
    const redis = this.redis;
    if (!redis || redis.status === 'end') return;
    try {
      await redis.quit();
    } catch {
      redis.disconnect();
    }
  }
}
