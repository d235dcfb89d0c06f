/**
 * Loaded into `agentry serve` with `--import` by `npm run bench -- --cpu-prof`: adds up, by
 * statement, the time the server's SQLite statements took on its event loop, and writes the
 * totals as JSON (`statements.<pid>.json`) beside the CPU profiles, in the `--cpu-prof-dir`
 * the server was started with, every second and at exit. Statements are added up by shape
 * (below): the same statement for any number of rows or listed values.
 * On PostgreSQL no statement runs on the event loop, and none is noted.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { timeStatements } from './statement-hook.mjs';

const dir = process.execArgv
  .find((arg) => arg.startsWith('--cpu-prof-dir='))
  ?.slice('--cpu-prof-dir='.length);
if (dir === undefined) throw new Error('the statement probe needs --cpu-prof-dir');

/** Shape → [statements run, milliseconds]. */
const totals = new Map();
/** Statement text → its entry in `totals`: a prepared statement's text is shaped once. */
const entries = new Map();

/**
 * A statement's shape: rows of a list that repeat (a many-row insert's values) as their first
 * and `…`, then every list of placeholders alone, however long, as `(?, …)`.
 */
function shapeOf(sql) {
  return sql
    .replace(/\s+/g, ' ')
    .replace(/\(([^()]*(?:\([^()]*\)[^()]*)*)\)(?:, \(\1\))+/g, '($1), …')
    .replace(/\(\?(?:, \?)*\)/g, '(?, …)');
}

timeStatements((source, _began, took) => {
  let total = entries.get(source);
  if (total === undefined) {
    const shape = shapeOf(source);
    total = totals.get(shape) ?? [0, 0];
    totals.set(shape, total);
    entries.set(source, total);
  }
  total[0] += 1;
  total[1] += took;
});

const write = () => {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `statements.${process.pid}.json`), JSON.stringify([...totals]));
};
setInterval(write, 1000).unref();
process.on('exit', write);
