import pino, { type Logger } from 'pino';
import type { LogLevel } from './config/index.js';

export type { Logger } from 'pino';

export function createLogger(level: LogLevel): Logger {
  return pino({
    level,
    // Credentials must never reach the log.
    redact: ['req.headers.authorization', 'headers.authorization'],
  });
}
