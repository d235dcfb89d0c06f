import { once } from 'node:events';
import type { Readable } from 'node:stream';
import type { Logger } from '../logger.js';
import { HOLD_MS, OutputClassifier, type ClassifiedEntry } from './log-levels.js';
import {
  MAX_LOG_ENTRY,
  type HostedLogLevel,
  type HostedLogLine,
  type HostingService,
} from '../services/hosting/index.js';

/** Lines longer than this (without a newline) are cut. */
const MAX_LINE = MAX_LOG_ENTRY;

/**
 * An agent's output as log lines: timestamped, cut to the longest kept, at most `perSecond`
 * a second. Past that, the rest of what was read is dropped and reading pauses until the
 * second is over, so that the agent waits on its own output; a line then says how many were
 * dropped. Each line gets the level its prefix gives it, and a traceback is one entry (see
 * log-levels.ts). Lines are written in batches, one write at a time.
 */
export class LogCapture {
  private pending: HostedLogLine[] = [];
  private writing: Promise<void> = Promise.resolve();
  private flushTimer: NodeJS.Timeout | undefined;
  private windowStart = 0;
  private inWindow = 0;
  private dropped = 0;
  private paused: Readable[] = [];
  private resumeTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly streams = new Set<Readable>();
  private readonly classifiers = new Map<Readable, OutputClassifier>();
  private readonly holdTimers = new Map<Readable, NodeJS.Timeout>();

  constructor(
    private readonly address: string,
    private readonly perSecond: number,
    private readonly hosting: Pick<HostingService, 'appendLogs'>,
    private readonly logger: Logger,
  ) {}

  /** Reads a stream of the agent's output; `level` is that of a line without a prefix. */
  attach(stream: Readable, level: HostedLogLevel, seen: (line: string) => void): void {
    this.streams.add(stream);
    const classifier = new OutputClassifier(level, (entry) => this.entry(entry), MAX_LINE);
    this.classifiers.set(stream, classifier);
    let partial = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      partial += chunk;
      let newline: number;
      while ((newline = partial.indexOf('\n')) !== -1) {
        const line = partial.slice(0, newline).replace(/\r$/, '');
        partial = partial.slice(newline + 1);
        seen(line);
        this.line(line, stream);
      }
      while (partial.length > MAX_LINE) {
        this.line(partial.slice(0, MAX_LINE), stream);
        partial = partial.slice(MAX_LINE);
      }
      this.holdFor(stream);
    });
    stream.on('end', () => {
      if (partial !== '') this.line(partial, stream);
      partial = '';
      this.release(stream);
      this.streams.delete(stream);
    });
    stream.on('error', () => {});
  }

  /** What a stream's classifier holds waits for more of it, but not for long. */
  private holdFor(stream: Readable): void {
    clearTimeout(this.holdTimers.get(stream));
    if (!this.classifiers.get(stream)?.holding) return;
    const timer = setTimeout(() => this.release(stream), HOLD_MS);
    timer.unref();
    this.holdTimers.set(stream, timer);
  }

  private release(stream: Readable): void {
    clearTimeout(this.holdTimers.get(stream));
    this.holdTimers.delete(stream);
    this.classifiers.get(stream)?.flush();
  }

  /** A line of the runner's own about the agent; never dropped. */
  system(text: string, level: HostedLogLevel = 'info'): void {
    this.push({ time: new Date(), level, type: 'system', entry: text });
  }

  private line(text: string, stream: Readable): void {
    const now = Date.now();
    if (now - this.windowStart >= 1000) this.newWindow(now);
    if (this.inWindow >= this.perSecond) {
      this.dropped += 1;
      if (!this.paused.includes(stream)) {
        stream.pause();
        this.paused.push(stream);
        clearTimeout(this.resumeTimer);
        this.resumeTimer = setTimeout(() => this.resume(), this.windowStart + 1000 - now);
      }
      return;
    }
    this.inWindow += 1;
    // The bootstrap's own lines are the runner's news, not the agent's.
    if (text.startsWith('[agentry] ')) {
      this.release(stream);
      this.push({ time: new Date(now), level: 'info', type: 'system', entry: text.slice(10) });
    } else {
      this.classifiers.get(stream)?.line(text.slice(0, MAX_LINE), now);
    }
  }

  private entry({ at, level, text, exception }: ClassifiedEntry): void {
    const line: HostedLogLine = { time: new Date(at), level, type: 'execution', entry: text };
    if (exception !== undefined) line.exception = exception;
    this.push(line);
  }

  private newWindow(now: number): void {
    this.windowStart = now;
    this.inWindow = 0;
    this.reportDropped();
  }

  private reportDropped(): void {
    if (this.dropped === 0) return;
    const n = this.dropped;
    this.dropped = 0;
    this.system(
      `${n} line${n === 1 ? '' : 's'} dropped: more than ${this.perSecond} lines a second`,
      'erro',
    );
  }

  private resume(): void {
    this.newWindow(Date.now());
    const paused = this.paused;
    this.paused = [];
    for (const stream of paused) stream.resume();
  }

  private push(line: HostedLogLine): void {
    this.pending.push(line);
    if (this.pending.length >= 200) void this.flush();
    else if (this.flushTimer === undefined) {
      this.flushTimer = setTimeout(() => void this.flush(), 200);
      this.flushTimer.unref();
    }
  }

  flush(): Promise<void> {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const lines = this.pending;
    this.pending = [];
    if (lines.length > 0) {
      this.writing = this.writing.then(() =>
        this.hosting.appendLogs(this.address, lines).catch((err: unknown) => {
          this.logger.warn({ err, address: this.address }, 'hosted agent log lines not kept');
        }),
      );
    }
    return this.writing;
  }

  /** Once the process has ended: the last lines, and the count of dropped ones, are written. */
  async close(): Promise<void> {
    if (this.closed) return this.writing;
    this.closed = true;
    clearTimeout(this.resumeTimer);
    for (const stream of this.paused) stream.resume();
    this.paused = [];
    // What the pipes still hold arrives before they end.
    await Promise.all(
      [...this.streams].map((stream) =>
        stream.readableEnded ? undefined : Promise.race([once(stream, 'end'), delay(1000)]),
      ),
    );
    for (const stream of this.classifiers.keys()) this.release(stream);
    this.reportDropped();
    await this.flush();
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
