import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import {
  mainThreadProfiles,
  profilingArgs,
  statementTotals,
  summarizeProfiles,
} from '../../bench/lib/profile.js';

const run = promisify(execFile);

/** A loop that keeps the CPU busy for `ms` in the function that runs it. */
const spin = (ms: number): string =>
  `let x = 0; const until = Date.now() + ${ms}; while (Date.now() < until) x += Math.sqrt(x + 1); return x;`;

/**
 * Sources as the server's bundle joins them: a SQL driver and a router from packages, and the
 * service's own code calling both, each spinning for a while in a function of its own.
 */
const SOURCES: Record<string, string> = {
  'node_modules/kysely/dist/esm/dialect/sqlite/sqlite-driver.js': `
export function executeQuery() {
  ${spin(300)}
}`,
  'node_modules/fastify/lib/route.js': `
export function routeHandler() {
  ${spin(300)}
}`,
  'src/services/mailbox.ts': `
import { executeQuery } from '../../node_modules/kysely/dist/esm/dialect/sqlite/sqlite-driver.js';
import { routeHandler } from '../../node_modules/fastify/lib/route.js';

function commitSubmissions(): number {
  ${spin(300)}
}

console.log(routeHandler() + commitSubmissions() + executeQuery());`,
};

/**
 * A program that runs SQLite statements as the store does: inserts of one, two and three rows,
 * reads of lists of one and of four, fifty times each (each a statement prepared afresh: the
 * probe counts by text, not by statement). better-sqlite3 is this checkout's, found from the
 * working directory as the server's is.
 */
const STATEMENTS = `
import { createRequire } from 'node:module';
import { join } from 'node:path';
const Database = createRequire(join(process.cwd(), 'package.json'))('better-sqlite3');
const db = new Database(':memory:');
db.exec('create table t (a text, b integer)');
for (let i = 0; i < 50; i++) {
  db.prepare('insert into t (a, b) values (?, ?)').run('x', i);
  db.prepare('insert into t (a, b) values (?, ?), (?, ?)').run('x', i, 'y', i);
  db.prepare('insert into t (a, b) values (?, ?), (?, ?), (?, ?)').run('x', i, 'y', i, 'z', i);
  db.prepare('select a from t where b in (?)').all(i);
  db.prepare('select a from t where b in (?, ?, ?, ?)').all(i, 1, 2, 3);
}`;

/** Bundles `sources` into one file (with a source map unless told), runs it profiled. */
async function profileOfBundle(withMap: boolean, sources = SOURCES) {
  const root = mkdtempSync(join(tmpdir(), 'agentry-profile-'));
  try {
    for (const [path, text] of Object.entries(sources)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    }
    const bundle = join(root, 'dist/agentry.js');
    await build({
      entryPoints: [join(root, Object.keys(sources).at(-1)!)],
      outfile: bundle,
      bundle: true,
      platform: 'node',
      format: 'esm',
      sourcemap: withMap,
      logLevel: 'silent',
    });
    const profiles = join(root, 'profiles');
    await run(process.execPath, [...profilingArgs(profiles), bundle]);
    return {
      ...summarizeProfiles(mainThreadProfiles(profiles)),
      statements: statementTotals(profiles),
    };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

function shareOf(summary: { stages: { stage: string; share: number }[] }, stage: string): number {
  return summary.stages.find((entry) => entry.stage === stage)?.share ?? 0;
}

describe('CPU profile summaries', () => {
  it("name a bundled frame's stage and function by the source its map points to", async () => {
    const summary = await profileOfBundle(true);
    // Each of the three spins for a third of the run.
    for (const stage of ['sql statements', 'fastify', 'agentry']) {
      const share = shareOf(summary, stage);
      assert.ok(share > 0.2 && share < 0.5, `${stage}: ${(share * 100).toFixed(1)} % of the time`);
    }
    const names = summary.topFunctions.slice(0, 3).map((entry) => entry.name.replace(/:\d+$/, ''));
    assert.deepEqual(names.sort(), [
      'commitSubmissions src/services/mailbox.ts',
      'executeQuery kysely/dist/esm/dialect/sqlite/sqlite-driver.js',
      'routeHandler fastify/lib/route.js',
    ]);
    const driver = summary.topFunctions.find((entry) => entry.name.startsWith('executeQuery'));
    // The line that declares it in its source, not in the bundle.
    assert.equal(driver?.name.endsWith('sqlite-driver.js:2'), true, driver?.name);
  });

  it('count a bundle without a map as the service itself', async () => {
    const summary = await profileOfBundle(false);
    // The driver's and the router's time are the service's: the bundle is in dist/. The driver
    // spins for a third of the run; what SQL keeps comes from outside the bundle, up to 1.2 % of the
    // run on a busy machine. The last check is of the service holding most of the run, not all
    // of it: on a busy machine Node's own work and garbage collection took a fifth (0.79).
    assert.equal(shareOf(summary, 'fastify'), 0);
    assert.ok(shareOf(summary, 'sql statements') < 0.05, JSON.stringify(summary.stages));
    assert.ok(shareOf(summary, 'agentry') > 0.6, JSON.stringify(summary.stages));
  });

  it('add up the time of each prepared SQLite statement by its shape, whatever its rows or list', async () => {
    const { statements } = await profileOfBundle(true, { 'src/store/work.ts': STATEMENTS });
    const runs = Object.fromEntries(statements.map(({ shape, runs }) => [shape, runs]));
    assert.deepEqual(runs, {
      'insert into t (a, b) values (?, …)': 50,
      'insert into t (a, b) values (?, …), …': 100,
      'select a from t where b in (?, …)': 100,
    });
    assert.ok(statements.every(({ ms }) => ms > 0));
  });
});
