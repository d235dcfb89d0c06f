/**
 * The part of autocannon 8's programmatic API the benchmarks use (the package ships no
 * types). See node_modules/autocannon/README.md for the full option list.
 */
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'DELETE' | 'PATCH' | 'OPTIONS';

  export interface RequestParams {
    method?: Method;
    path?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
  }

  export interface Request extends RequestParams {
    /** Called once before each request is sent; returns the request to send. */
    setupRequest?: (request: RequestParams, context: Record<string, unknown>) => RequestParams;
    /** Called with each response; `context` is the one `setupRequest` saw for it. */
    onResponse?: (status: number, body: string, context: Record<string, unknown>) => void;
  }

  export interface Options extends RequestParams {
    url: string;
    connections?: number;
    /** Seconds. */
    duration?: number;
    /** Stop after this many requests (wins over duration). */
    amount?: number;
    pipelining?: number;
    /** Seconds before a request counts as timed out. */
    timeout?: number;
    requests?: Request[];
  }

  export interface Histogram {
    average: number;
    p50: number;
    p99: number;
    max: number;
    total: number;
  }

  export interface Result {
    requests: Histogram & { sent: number };
    latency: Histogram;
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    statusCodeStats: Record<string, { count: number }>;
  }

  export interface Instance extends EventEmitter, PromiseLike<Result> {
    stop(): void;
    on(
      event: 'response',
      listener: (client: unknown, status: number, bytes: number, ms: number) => void,
    ): this;
    on(event: 'reqError', listener: (err: Error) => void): this;
  }

  function autocannon(options: Options): Instance;
  export default autocannon;
}
