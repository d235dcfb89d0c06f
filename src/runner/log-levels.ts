import type { HostedLogLevel } from '../services/hosting/index.js';

/**
 * What an agent's output means, line by line: the level a line's prefix gives (uAgents'
 * loggers write `INFO:     [name]: text`, `WARNING:  …`, `ERROR:    …` on standard output,
 * Python's own logging `WARNING:name:text` on standard error), Python's warnings, and its
 * tracebacks, which become one entry with their lines, at `erro`, together with the log line
 * that announced them (uAgents' `logger.exception`). A line without a prefix is at its
 * stream's level.
 */

/** An entry made of one line of output or of several (a traceback). */
export interface ClassifiedEntry {
  /** When its first line was read (ms since the epoch). */
  at: number;
  level: HostedLogLevel;
  text: string;
  /** A traceback's last line, `KeyError: 'x'`: the exception it ended with. */
  exception?: string;
}

/** How long a line that a traceback may follow waits for it, and a traceback for its end. */
export const HOLD_MS = 200;

const PREFIXES: Record<string, HostedLogLevel> = {
  TRACE: 'trce',
  DEBUG: 'debg',
  INFO: 'info',
  WARNING: 'warn',
  WARN: 'warn',
  ERROR: 'erro',
  CRITICAL: 'erro',
  FATAL: 'erro',
};
/** A logging level's name and a colon at the start of the line (after colours, if any). */
const PREFIX = /^(TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL):/;
/** `path.py:12: DeprecationWarning: text`, as Python's warnings module writes them. */
const PYTHON_WARNING = /^\S.*:\d+: [A-Za-z_]*Warning: /;
const TRACEBACK_START = 'Traceback (most recent call last):';
/** The lines between the tracebacks of a chain of exceptions. */
const CHAIN_LINES = new Set([
  '',
  'During handling of the above exception, another exception occurred:',
  'The above exception was the direct cause of the following exception:',
]);
// eslint-disable-next-line no-control-regex
const COLOURS = /\u001b\[[0-9;]*m/g;

/** The level a line's own prefix gives it, or undefined when it has none. */
export function prefixLevel(line: string): HostedLogLevel | undefined {
  const match = PREFIX.exec(line.replace(COLOURS, ''));
  if (match) return PREFIXES[match[1]!];
  if (PYTHON_WARNING.test(line)) return 'warn';
  return undefined;
}

/** What is being gathered: a line a traceback may follow, or a traceback. */
interface Held {
  at: number;
  level: HostedLogLevel;
  lines: string[];
  /** Whether a traceback is being read (and, if so, whether its exception line was). */
  traceback: 'none' | 'frames' | 'ended';
  exception?: string;
}

/**
 * Classifies one stream's lines, in order. Lines that may be followed by more of the same
 * entry are held until the next line says, or until `flush` (the caller calls it once the
 * stream has been quiet for {@link HOLD_MS}).
 */
export class OutputClassifier {
  private held: Held | undefined;
  /** The level of the last entry, which an indented line after it continues. */
  private last: HostedLogLevel | undefined;

  constructor(
    /** The level of a line without a prefix: `info` on standard output, `erro` on standard error. */
    private readonly plain: HostedLogLevel,
    private readonly emit: (entry: ClassifiedEntry) => void,
    /** The longest entry, in characters. */
    private readonly maxLength: number,
  ) {}

  /** Whether lines are held, waiting for what follows them. */
  get holding(): boolean {
    return this.held !== undefined;
  }

  /** A line read at `at` (ms since the epoch). */
  line(text: string, at: number): void {
    const held = this.held;
    if (held !== undefined) {
      if (held.traceback === 'frames') {
        held.lines.push(text);
        // Frames are indented; the first line that is not ends the traceback: the exception.
        if (text !== '' && !/^\s/.test(text)) {
          held.traceback = 'ended';
          held.exception = text;
        }
        return;
      }
      if (held.traceback === 'ended' && (CHAIN_LINES.has(text) || text === TRACEBACK_START)) {
        held.lines.push(text);
        if (text === TRACEBACK_START) held.traceback = 'frames';
        return;
      }
      if (held.traceback === 'none' && text === TRACEBACK_START) {
        held.lines.push(text);
        held.traceback = 'frames';
        held.level = 'erro';
        return;
      }
      this.flush();
    }
    if (text === TRACEBACK_START) {
      this.held = { at, level: 'erro', lines: [text], traceback: 'frames' };
      return;
    }
    const level = prefixLevel(text);
    if (level === 'erro' || level === 'warn') {
      // `logger.exception` and `logger.warning(…, exc_info=True)` write a traceback next.
      this.held = { at, level, lines: [text], traceback: 'none' };
      return;
    }
    const continued = level === undefined && /^\s/.test(text) ? this.last : undefined;
    this.out({ at, level: level ?? continued ?? this.plain, text });
  }

  /** Emits what is held as it stands. */
  flush(): void {
    const held = this.held;
    if (held === undefined) return;
    this.held = undefined;
    while (held.lines.length > 1 && held.lines[held.lines.length - 1] === '') held.lines.pop();
    const entry: ClassifiedEntry = {
      at: held.at,
      level: held.level,
      text: this.cut(held.lines.join('\n')),
    };
    if (held.exception !== undefined) entry.exception = held.exception.slice(0, 500);
    this.out(entry);
  }

  private out(entry: ClassifiedEntry): void {
    this.last = entry.level;
    this.emit(entry);
  }

  /** A traceback too long to keep whole keeps its start and its end, where the exception is. */
  private cut(text: string): string {
    if (text.length <= this.maxLength) return text;
    const head = Math.floor(this.maxLength / 4);
    const widest = `\n… ${text.length} characters left out …\n`.length;
    const tail = this.maxLength - head - widest;
    const marker = `\n… ${text.length - head - tail} characters left out …\n`;
    return `${text.slice(0, head)}${marker}${text.slice(text.length - tail)}`;
  }
}
