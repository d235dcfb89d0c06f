import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { redactUrl, type Config } from './config/index.js';
import { createContext, type AppContext, type ContextOverrides } from './context.js';
import type { NewUser } from './services/users.js';

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
    const ctx = createContext(config, options.overrides, { serving: true });
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
}
