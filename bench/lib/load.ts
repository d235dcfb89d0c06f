import autocannon, { type Request, type RequestParams } from 'autocannon';
import { Pool } from 'undici';
import { processCpuSeconds } from './proc.js';
import { summarize, type LatencySummary } from './stats.js';

/** Connections and durations every throughput measure uses, ceilings included. */
export interface LoadProfile {
  connections: number;
  durationSeconds: number;
  warmupSeconds: number;
}

export const loadProfile: LoadProfile = { connections: 16, durationSeconds: 5, warmupSeconds: 1 };

export interface HttpRequest {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

/**
 * Requests that POST `bodies` to `path` one after another: `from(offset)` is the request
 * builder of a run whose first request sends `bodies[offset]`.
 */
export function postsOf(
  path: string,
  bodies: readonly string[],
  headers?: Record<string, string>,
): (offset: number) => (index: number) => HttpRequest {
  return (offset) => (index) => ({
    method: 'POST',
    path,
    ...(headers && { headers }),
    body: bodies[offset + index],
  });
}

export interface LoadOptions {
  /** Base URL of the server, e.g. http://127.0.0.1:41234 */
  url: string;
  connections: number;
  /** Run for a time, or until a number of requests have been answered. */
  until: { seconds: number } | { requests: number };
  /**
   * The same request every time, or the request with a given index: indices count from 0
   * across all connections, so every pre-built request is sent exactly once.
   */
  request: HttpRequest | ((index: number) => HttpRequest);
  /** The status every answer must have; any other answer fails the run. */
  expectStatus: number;
  /** Sees the body of each answer and the index of the request it answers. */
  onResponse?: (index: number, body: string) => void;
  /** A process (the server under test) whose CPU time over the run is reported. */
  cpuOfPid?: number;
}

export interface LoadResult {
  requests: number;
  seconds: number;
  requestsPerSecond: number;
  latencyMs: LatencySummary;
  /** CPU seconds `cpuOfPid` used during the run, per second of the run (1 = one core). */
  serverCores?: number;
  /** The same for the load generator (this process). */
  loadGeneratorCores: number;
}

function params(request: HttpRequest): RequestParams {
  const headers = { ...request.headers };
  if (request.body !== undefined) headers['content-type'] ??= 'application/json';
  return { method: request.method, path: request.path, headers, body: request.body };
}

/** A run's measures from its answered latencies and the CPU both sides used over it. */
function loadResult(
  latencies: number[],
  seconds: number,
  ownCpu: NodeJS.CpuUsage,
  serverCpuSeconds: number | undefined,
): LoadResult {
  return {
    requests: latencies.length,
    seconds,
    requestsPerSecond: latencies.length / seconds,
    latencyMs: summarize(latencies),
    loadGeneratorCores: (ownCpu.user + ownCpu.system) / 1e6 / seconds,
    ...(serverCpuSeconds === undefined ? {} : { serverCores: serverCpuSeconds / seconds }),
  };
}

/**
 * One autocannon run on this thread. Latencies are kept per answer (autocannon's own
 * histogram has whole-millisecond buckets, too coarse for sub-millisecond answers).
 */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const { request, expectStatus } = options;
  let nextIndex = 0;
  let unexpected: { count: number; first: string } | undefined;
  const sequence: Request = {
    ...(typeof request === 'function'
      ? {
          setupRequest: (defaults, context) => {
            const index = nextIndex++;
            context.index = index;
            return { ...defaults, ...params(request(index)) };
          },
        }
      : params(request)),
    onResponse: (status, body, context) => {
      if (status !== expectStatus) {
        unexpected ??= { count: 0, first: `${status} ${body.slice(0, 300)}` };
        unexpected.count++;
      } else {
        options.onResponse?.((context.index as number | undefined) ?? 0, body);
      }
    },
  };

  const latencies: number[] = [];
  const startedAt = performance.now();
  let lastAnswerAt = startedAt;
  const ownCpuBefore = process.cpuUsage();
  const cpuBefore = options.cpuOfPid === undefined ? 0 : processCpuSeconds(options.cpuOfPid);
  const instance = autocannon({
    url: options.url,
    connections: options.connections,
    ...('seconds' in options.until
      ? { duration: options.until.seconds }
      : { amount: options.until.requests }),
    requests: [sequence],
  });
  instance.on('response', (_client, status, _bytes, ms) => {
    if (status === expectStatus) latencies.push(ms);
    lastAnswerAt = performance.now();
  });
  let firstError: string | undefined;
  instance.on('reqError', (error) => (firstError ??= error.message));
  const result = await instance;
  // autocannon notices the end only at its next one-second sample, and an amount-bound run
  // would count that idle wait: the run ends with its last answer.
  const seconds = (lastAnswerAt - startedAt) / 1000;
  const ownCpu = process.cpuUsage(ownCpuBefore);
  const cpuSeconds =
    options.cpuOfPid === undefined ? undefined : processCpuSeconds(options.cpuOfPid) - cpuBefore;

  if (unexpected) {
    throw new Error(
      `${unexpected.count} answers were not ${expectStatus}; the first: ${unexpected.first}`,
    );
  }
  if (result.errors > 0) {
    throw new Error(
      `${result.errors} requests failed (${result.timeouts} timed out); the first: ${firstError}`,
    );
  }
  if (latencies.length === 0) throw new Error('no request was answered');
  return loadResult(latencies, seconds, ownCpu, cpuSeconds);
}

/**
 * A warm-up run (discarded, lets the JIT settle) then the measured run, both by time. Request
 * indices start at 0 in each run: use it for requests that may be repeated.
 */
export async function measureForDuration(
  options: Omit<LoadOptions, 'until' | 'connections'>,
  profile: LoadProfile = loadProfile,
): Promise<LoadResult> {
  const common = { ...options, connections: profile.connections };
  await runLoad({ ...common, until: { seconds: profile.warmupSeconds } });
  return runLoad({ ...common, until: { seconds: profile.durationSeconds } });
}

export interface PacedOptions {
  url: string;
  /** Connections kept open to the server; a request waits for a free one. */
  connections: number;
  /** Requests started per second, evenly spaced. */
  rate: number;
  requests: number;
  request: (index: number) => HttpRequest;
  expectStatus: number;
  cpuOfPid?: number;
  /** Told of each expected answer as it is read: when it was sent, and how long it took. */
  onAnswer?: (index: number, timing: { sentAt: number; ms: number }) => void;
}

/**
 * An open-loop run: requests start on a fixed schedule, whatever the answers before them,
 * and each latency counts from the moment its request was handed to the connection pool
 * (waiting for a free connection included), so a server that falls behind shows it in the
 * percentiles where a closed loop would only send less. For latency at a given load rather
 * than at saturation. Every connection is opened before the clock starts (a health check
 * on each), so the percentiles are those of clients that stay connected, as the closed-loop
 * runs' are after their warm-up, not of 50 TCP handshakes in the first milliseconds.
 */
export async function runPaced(options: PacedOptions): Promise<LoadResult> {
  const pool = new Pool(options.url, { connections: options.connections, pipelining: 1 });
  await Promise.all(
    Array.from({ length: options.connections }, async () => {
      const response = await pool.request({ method: 'GET', path: '/health' });
      await response.body.dump();
    }),
  );
  const latencies: number[] = [];
  let unexpected: { count: number; first: string } | undefined;
  const ownCpuBefore = process.cpuUsage();
  const cpuBefore = options.cpuOfPid === undefined ? 0 : processCpuSeconds(options.cpuOfPid);
  const startedAt = performance.now();
  const intervalMs = 1000 / options.rate;
  const answers: Promise<void>[] = [];
  const send = async (index: number): Promise<void> => {
    const { method, path, headers, body } = params(options.request(index));
    const sentAt = performance.now();
    const response = await pool.request({ method: method!, path: path!, headers, body });
    const text = await response.body.text();
    if (response.statusCode === options.expectStatus) {
      const ms = performance.now() - sentAt;
      latencies.push(ms);
      options.onAnswer?.(index, { sentAt, ms });
    } else {
      unexpected ??= { count: 0, first: `${response.statusCode} ${text.slice(0, 300)}` };
      unexpected.count++;
    }
  };
  let sent = 0;
  while (sent < options.requests) {
    const now = performance.now();
    for (; sent < options.requests && startedAt + sent * intervalMs <= now; sent++) {
      answers.push(send(sent));
    }
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, intervalMs / 2)));
  }
  await Promise.all(answers);
  const seconds = (performance.now() - startedAt) / 1000;
  const ownCpu = process.cpuUsage(ownCpuBefore);
  const cpuSeconds =
    options.cpuOfPid === undefined ? undefined : processCpuSeconds(options.cpuOfPid) - cpuBefore;
  await pool.close();
  if (unexpected) {
    throw new Error(
      `${unexpected.count} answers were not ${options.expectStatus}; the first: ${unexpected.first}`,
    );
  }
  return loadResult(latencies, seconds, ownCpu, cpuSeconds);
}
