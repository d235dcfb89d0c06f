import { hostname } from 'node:os';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { redactUrl, type Config } from './config/index.js';
import {
  createContext,
  createHostingRunner,
  type AppContext,
  type BackgroundLoop,
  type ContextOverrides,
} from './context.js';
import { limitConnectionsPerAddress } from './infra/connection-limit.js';
import type { Logger } from './logger.js';
import type { PythonSearch } from './runner/python.js';
import type { HostingRunner } from './runner/runner.js';
import type { HostingHere } from './services/hosting/index.js';
import type { NewUser } from './services/users.js';

export interface ServerOptions {
  overrides?: ContextOverrides;
  /**
   * A search under way for a Python that runs hosted agents (the serving command starts it
   * when `hosting.python` is not set): awaited once the app is built, so that it costs the
   * start nothing; the interpreter it finds becomes `hosting.python`, and what it found is
   * said at start and on the console.
   */
  python?: Promise<PythonSearch>;
}

/** Whether this process runs hosted agents, from its settings and what was found. */
function hostingHere(config: Config, search: PythonSearch | undefined): HostingHere | undefined {
  if (config.hosting.runner === 'separate') return { kind: 'separate' };
  if (config.hosting.python !== undefined) {
    return {
      kind: 'here',
      python: config.hosting.python,
      pythonVersion: search?.python?.pythonVersion,
      uagents: search?.python?.uagents,
    };
  }
  return search?.reason === undefined
    ? undefined
    : { kind: 'off', reason: search.reason, enable: search.enable };
}

/** A {@link BackgroundLoop} under way: one run at a time, each scheduled as the last ends. */
class RunningLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly loop: BackgroundLoop,
    private readonly logger: Logger,
  ) {
    this.after(0);
  }

  /** Starts no further run; resolves once the run under way, if any, has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private after(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.loop
        .run()
        .then(
          (more) => (more ? 0 : this.loop.idleMs),
          (err: unknown) => {
            this.logger.error({ err, loop: this.loop.name }, 'background work failed');
            return this.loop.idleMs;
          },
        )
        .then((wait) => {
          this.running = undefined;
          this.after(wait);
        });
    }, ms);
    this.timer.unref();
  }
}

/**
 * Owns the process-level concerns the app must not have: the listening socket, timers for
 * housekeeping and background loops, first-start bootstrap, and an orderly shutdown.
 */
export class Server {
  private timers: NodeJS.Timeout[] = [];
  private loops: RunningLoop[] = [];
  private closing: Promise<void> | undefined;
  private draining: Promise<void> | undefined;
  private endGrace: (() => void) | undefined;
  /** The runner of hosted agents, when this process runs them. */
  private runner: HostingRunner | undefined;
  /** The hosting key file this start made, if it made one. */
  hostingKeyMade: string | undefined;

  private constructor(
    readonly ctx: AppContext,
    readonly app: FastifyInstance,
    /** The user created on first start, if this start created one. */
    readonly bootstrapped: NewUser | undefined,
    /** The migrations this start applied, oldest first. */
    readonly migrated: string[],
    /** Whether this process runs hosted agents, as it found at start. */
    readonly hosting: HostingHere | undefined,
  ) {}

  static async create(config: Config, options: ServerOptions = {}): Promise<Server> {
    const ctx = createContext(config, options.overrides, { serving: true });
    try {
      let migrated: string[] = [];
      if (config.migrateOnStart) {
        migrated = (await ctx.store.migrate()).applied;
        if (migrated.length > 0) {
          ctx.logger.info(
            { applied: migrated.length, latest: migrated[migrated.length - 1] },
            'database migrated',
          );
        }
      }
      await ctx.rateLimits?.connect();
      await ctx.changes.listening();
      const bootstrapped = config.bootstrapUser ? await ctx.services.users.bootstrap() : undefined;
      const app = await buildApp(ctx);
      const search = await options.python;
      if (search?.python && config.hosting.python === undefined) {
        config.hosting.python = search.python.python;
      }
      const hosting = hostingHere(config, search);
      if (hosting !== undefined) ctx.services.hosting.setHere(hosting);
      return new Server(ctx, app, bootstrapped, migrated, hosting);
    } catch (err) {
      await ctx.close();
      throw err;
    }
  }

  /**
   * Listens and starts housekeeping and the background loops; resolves to the URL it listens on.
   * `listening` hears that URL once the socket listens, before the line that logs it.
   */
  async start(listening?: (address: string) => void): Promise<string> {
    const { config, logger } = this.ctx;
    // A trusted proxy's connections carry many clients: those are limited per forwarded
    // client, request by request (installClients), not here.
    limitConnectionsPerAddress(
      this.app.server,
      config.maxConnectionsPerAddress,
      (client) => logger.debug({ client }, 'connection refused: too many open from this address'),
      (address) => this.ctx.trustedProxies.trusts(address),
    );
    // A runner that cannot run agents here stops the start before anything listens.
    if (config.hosting.python !== undefined && config.hosting.runner === 'serve') {
      this.runner = createHostingRunner(this.ctx);
      await this.runner.prepare();
      // Its agents' seeds are sealed with it: made now, as the first user is, not on demand.
      try {
        this.hostingKeyMade = this.ctx.services.hosting.prepareKey();
      } catch (err) {
        // A key file that cannot be used is said by each call that needs it, as before.
        logger.warn({ err }, 'hosting key unusable');
      }
    }
    // A long queue of connections not yet accepted: thousands of agents may reconnect at once
    // (after another replica stopped); the kernel caps it (net.core.somaxconn).
    const address = await this.app.listen({ port: config.port, host: config.host, backlog: 4096 });
    this.ctx.services.activity.start();
    this.ctx.services.webhooks.start();
    for (const task of this.ctx.housekeeping) {
      const timer = setInterval(() => {
        task
          .run()
          .catch((err: unknown) => logger.error({ err, task: task.name }, 'housekeeping failed'));
      }, task.intervalMs);
      timer.unref();
      this.timers.push(timer);
    }
    this.loops = this.ctx.loops.map((loop) => new RunningLoop(loop, logger));
    // `agentry status` on this database finds the server by this record, whatever its port.
    await this.ctx.services.servers
      .listening(reachableHere(address), hostname())
      .catch((err: unknown) => logger.warn({ err }, 'could not record where this server listens'));
    // Agents reach this process by its public URL: they start once it listens.
    await this.runner?.start();
    listening?.(address);
    logger.info(
      {
        address,
        publicUrl: config.publicUrl,
        database: redactUrl(config.databaseUrl),
        verifier: this.ctx.verifier.kind,
      },
      'agentry listening',
    );
    return address;
  }

  /**
   * A graceful stop. At once `/ready` answers 503 (a load balancer takes this replica out of
   * rotation) and every answer closes its connection; requests are still served for
   * `graceMs` so that clients and the balancer notice, then the server closes (see
   * {@link close}). Background loops start no further run: what falls due goes to the other
   * replicas, and a run under way ends within the grace period or is waited for by `close`.
   * Resolves once it has closed.
   */
  drain(graceMs: number): Promise<void> {
    this.draining ??= (async () => {
      this.ctx.lifecycle.startDraining();
      void this.stopLoops();
      this.ctx.logger.info({ graceMs }, 'draining: not ready; closing after the grace period');
      const spreading = this.spreadHeldPollEnds(graceMs);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs);
        this.endGrace = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      clearInterval(spreading);
      await this.close();
    })();
    return this.draining;
  }

  /**
   * During a drain, ends the held polls a slice at a time over the grace period (from its
   * first quarter, once the balancer has seen `/ready` fail, to nine tenths of it) rather
   * than all at once at its end: thousands of agents coming back together would reach the
   * other replicas as one burst of new connections, more than they accept in time.
   */
  private spreadHeldPollEnds(graceMs: number): NodeJS.Timeout {
    const slices = 20;
    const start = performance.now() + graceMs / 4;
    const end = performance.now() + (graceMs * 9) / 10;
    const timer = setInterval(
      () => {
        const now = performance.now();
        if (now < start) return;
        const left = Math.max(1, Math.ceil(((end - now) / (end - start)) * slices));
        this.ctx.endSomeHeldPolls(Math.ceil(this.ctx.heldPolls() / left));
      },
      Math.max(10, (graceMs * 13) / 20 / slices),
    );
    timer.unref();
    return timer;
  }

  /** Ends the grace period of a drain under way now (a second signal). */
  endGracePeriod(): void {
    this.endGrace?.();
  }

  /**
   * Stops accepting connections, lets every request in flight finish and be answered (a
   * submit waiting for its commit gets it; held polls end), answers requests that still
   * arrive on open connections with 503, lets the run of each background loop under way end
   * (a forward in flight is recorded, or its message stays kept), then closes the store.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.ctx.lifecycle.startDraining();
      for (const timer of this.timers) clearInterval(timer);
      // Hosted agents stop (their last lines kept) while the store is open, and are released
      // for other runners to take.
      await this.runner?.stop();
      await this.ctx.services.servers
        .stopped()
        .catch((err: unknown) => this.ctx.logger.warn({ err }, 'could not withdraw this server'));
      await Promise.all([this.app.close(), this.stopLoops()]);
      await this.ctx.close();
    })();
    return this.closing;
  }

  private stopLoops(): Promise<void> {
    return Promise.all(this.loops.map((loop) => loop.stop())).then(() => undefined);
  }
}

/** The address a listening socket reports, as a client on the same machine reaches it. */
function reachableHere(address: string): string {
  const url = new URL(address);
  if (url.hostname === '0.0.0.0') url.hostname = '127.0.0.1';
  if (url.hostname === '[::]') url.hostname = '[::1]';
  return url.origin;
}
