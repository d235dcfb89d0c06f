import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * A request's logger, whose pino child (the request's id bound to it) is made the first time the
 * request logs at a level that is on. Most requests never do; a child made up front, with its
 * bindings already serialized to text, would be kept by every held mailbox poll for as long as
 * it waits.
 */
class RequestLogger implements FastifyBaseLogger {
  private made: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Bindings,
  ) {}

  get level(): string {
    return (this.made ?? this.parent).level;
  }

  set level(level: string) {
    this.logger().level = level;
  }

  fatal(obj: unknown, msg?: string, ...args: unknown[]): void {
    this.write('fatal', obj, msg, args);
  }

  error(obj: unknown, msg?: string, ...args: unknown[]): void {
    this.write('error', obj, msg, args);
  }

  warn(obj: unknown, msg?: string, ...args: unknown[]): void {
    this.write('warn', obj, msg, args);
  }

  info(obj: unknown, msg?: string, ...args: unknown[]): void {
    this.write('info', obj, msg, args);
  }

  debug(obj: unknown, msg?: string, ...args: unknown[]): void {
    this.write('debug', obj, msg, args);
  }

  trace(obj: unknown, msg?: string, ...args: unknown[]): void {
    this.write('trace', obj, msg, args);
  }

  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger().child(bindings, options);
  }

  private logger(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings));
  }

  private write(level: Level, obj: unknown, msg: string | undefined, args: unknown[]): void {
    if (!this.made && !this.parent.isLevelEnabled(level)) return;
    // pino counts its arguments: a message left out must not become `undefined`.
    const log = this.logger()[level] as (...all: unknown[]) => void;
    if (msg === undefined && args.length === 0) log.call(this.made, obj);
    else log.call(this.made, obj, msg, ...args);
  }
}

/**
 * Fastify's `childLoggerFactory`: requests get a {@link RequestLogger}, unless the route asks
 * for a level or serializers of its own (then the child is made at once, as Fastify would).
 */
export function requestLoggerFactory(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  return Object.keys(options).length > 0
    ? logger.child(bindings, options)
    : new RequestLogger(logger as Logger, bindings);
}
