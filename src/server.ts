import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { redactUrl, type Config } from './config/index.js';
import { createContext, type AppContext, type ContextOverrides } from './context.js';
import { createLogger } from './logger.js';
import type { NewUser } from './services/users.js';
import { Store } from './store/index.js';

export interface ServerOptions {
  overrides?: ContextOverrides;
}

/**
 * Owns the process-level concerns the app must not have: the listening socket, timers for
 * housekeeping, first-start bootstrap, and an orderly shutdown.
 */
export class Server {
  private timers: NodeJS.Timeout[] = [];
  private closing: Promise<void> | undefined;

  private constructor(
    readonly ctx: AppContext,
    readonly app: FastifyInstance,
    /** The user created on first start, if this start created one. */
    readonly bootstrapped: NewUser | undefined,
  ) {}

  static async create(config: Config, options: ServerOptions = {}): Promise<Server> {
    // A serving process checkpoints SQLite from a thread of its own; admin commands, which
    // write little and exit, leave it to their commits.
    const logger =
      options.overrides?.logger ??
      createLogger({ level: config.logLevel, format: config.logFormat });
    const store =
      options.overrides?.store ??
      Store.open(config.databaseUrl, {
        backgroundCheckpoints: {
          onError: (err) =>
            logger.error(
              { err },
              'background checkpoints failed; commits checkpoint by themselves',
            ),
        },
      });
    const ctx = createContext(config, { ...options.overrides, logger, store });
    try {
      if (config.migrateOnStart) {
        const { applied } = await ctx.store.migrate();
        if (applied.length > 0) ctx.logger.info({ applied }, 'database migrated');
      }
      const bootstrapped = config.bootstrapUser ? await ctx.services.users.bootstrap() : undefined;
      const app = await buildApp(ctx);
      return new Server(ctx, app, bootstrapped);
    } catch (err) {
      await ctx.close();
      throw err;
    }
  }

  /** Listens and starts housekeeping; resolves to the URL it listens on. */
  async start(): Promise<string> {
    const { config, logger } = this.ctx;
    const address = await this.app.listen({ port: config.port, host: config.host });
    for (const task of this.ctx.housekeeping) {
      const timer = setInterval(() => {
        task
          .run()
          .catch((err: unknown) => logger.error({ err, task: task.name }, 'housekeeping failed'));
      }, task.intervalMs);
      timer.unref();
      this.timers.push(timer);
    }
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

  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const timer of this.timers) clearInterval(timer);
      await this.app.close();
      await this.ctx.close();
    })();
    return this.closing;
  }

  /** Closes on SIGINT/SIGTERM, letting in-flight requests finish. */
  closeOnSignals(): void {
    const onSignal = (signal: NodeJS.Signals): void => {
      this.ctx.logger.info({ signal }, 'shutting down');
      this.close().then(
        () => process.exit(0),
        (err: unknown) => {
          this.ctx.logger.error({ err }, 'shutdown failed');
          process.exit(1);
        },
      );
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  }
}
