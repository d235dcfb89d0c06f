/**
 * Times every better-sqlite3 statement a process runs, for the probes that bench commands
 * load into `agentry serve` with `--import`. The server's better-sqlite3 is found from its
 * working directory (the root of the build it runs, which a compare's other build has its own
 * of): the one-file build keeps the package outside, so it is that module.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';

/**
 * Calls `noted(source, began, took)` after each statement's `run`, `all` or `get`, with its
 * SQL, when it began (`performance.now()`) and how many milliseconds it took.
 */
export function timeStatements(noted) {
  const BetterSqlite3 = createRequire(join(process.cwd(), 'package.json'))('better-sqlite3');
  const probe = new BetterSqlite3(':memory:');
  const Statement = Object.getPrototypeOf(probe.prepare('select 1'));
  probe.close();
  for (const method of ['run', 'all', 'get']) {
    const original = Statement[method];
    Statement[method] = function timed(...args) {
      const began = performance.now();
      try {
        return original.apply(this, args);
      } finally {
        noted(this.source, began, performance.now() - began);
      }
    };
  }
}
