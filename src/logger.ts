import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';
import type { LogFormat, LogLevel } from './config/index.js';

export type { Logger } from 'pino';

export interface LoggerOptions {
  level: LogLevel;
  /** `json`: one object per line, for collectors; `pretty`: lines for a person at a terminal. */
  format?: LogFormat;
  /** File descriptor written to: 1 for the server, 2 for commands whose stdout is their answer. */
  fd?: 1 | 2;
}

export function createLogger({ level, format = 'json', fd = 1 }: LoggerOptions): Logger {
  const options = {
    level,
    // Credentials must never reach the log.
    redact: ['req.headers.authorization', 'headers.authorization'],
  };
  if (format === 'json') return pino(options, pino.destination({ dest: fd, sync: true }));
  const stream = fd === 1 ? process.stdout : process.stderr;
  return pino(
    options,
    pretty({
      destination: fd,
      sync: true,
      colorize: stream.isTTY === true,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname',
      // One line an event (an error's stack still takes its own lines).
      singleLine: true,
    }),
  );
}
