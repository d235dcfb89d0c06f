import { Writable } from 'node:stream';
import pino from 'pino';
import type { Logger } from '../../src/logger.js';

/** One line a server logged, as pino writes it. */
export interface LogLine {
  level: number;
  msg: string;
  agent?: string;
}

/** pino's level of warnings (and above them, errors). */
export const WARN = 40;

/**
 * A logger at `info` that keeps every line it writes: `lines` parsed, `raw` as written (one
 * JSON object a line, as `agentry serve` logs by default).
 */
export function capturingLogger(): { logger: Logger; lines: LogLine[]; raw: string[] } {
  const lines: LogLine[] = [];
  const raw: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) {
        raw.push(line);
        lines.push(JSON.parse(line) as LogLine);
      }
      done();
    },
  });
  return { logger: pino({ level: 'info' }, sink), lines, raw };
}
