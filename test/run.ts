/**
 * `npm test`: the test files, several at once, then the few that must run by themselves.
 *
 *   npm test                               every file
 *   npm test -- test/http/agents.test.ts   the files named
 *   npm test -- --test-name-pattern=…      as `node --test` takes it; so is
 *                                          --test-reporter=spec|tap|dot
 *
 * Each file runs in a process of its own (as `node --test` runs it), compiled beforehand to
 * JavaScript (`test/kit/compiled-tests.ts`), and is independent of the others: its servers
 * listen on ports the system gives, its SQLite files and directories are temporary ones of its
 * own, on PostgreSQL it works in a database of its own (`test/kit/databases.ts`), and in Redis
 * under a key prefix of its own (`test/kit/redis.ts`).
 * `AGENTRY_TEST_TIMES=FILE` writes how long every file took to FILE (JSON, slowest first).
 * `AGENTRY_TEST_CONCURRENCY` sets how many files run at once: by default one more than the
 * cores, for a file waits on child processes, databases and the network part of the time (on
 * two cores, four at once took as long as three, and slowed the longest files further).
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, relative } from 'node:path';
import { finished } from 'node:stream/promises';
import { run } from 'node:test';
import { dot, spec, tap } from 'node:test/reporters';
import pg from 'pg';
import { postgresConnection } from '../src/store/database.js';
import { ensureWebBuild } from './kit/browser.js';
import { compileTests, type CompiledTests } from './kit/compiled-tests.js';
import { runDatabasePrefix, runOnPostgres, testPgUrl } from './kit/databases.js';
import { ensureServerBuild, repositoryRoot } from './kit/process.js';

/**
 * Files run by themselves, one after another, once the others are done; each for the reason
 * given beside it.
 */
const ALONE = [
  // 2,000 agents holding polls through Caddy in front of two replicas.
  'test/e2e/behind-caddy.test.ts',
  // Fork bombs, allocation, disk and stdout floods, while the server must answer within
  // half a second.
  'test/e2e/hosting-hostile.test.ts',
  // An agent stopped for using more than its share of a core, at a lower priority than the
  // tests: beside other busy files it would get less than that share.
  'test/e2e/hosting-limits.test.ts',
  // New code for a running agent while pip installs: a restart that takes longer than one of
  // the runner's rounds (200 ms here) is asked for again by the next round, and the two
  // starts may then install twice or leave a bridge socket listening (the file then never
  // ends). Beside other files, restarts take that long.
  'test/e2e/hosting-requirements.test.ts',
];

/**
 * The files that take longest, longest first: they start first, so that none of them is the
 * last left running while the other slots are idle. The rest follow in name order.
 */
const LONGEST = [
  'test/e2e/uagents-proxy-outage.test.ts',
  'test/e2e/uagents-presence.test.ts',
  'test/http/probes.test.ts',
  'test/cli/serve-hosting.test.ts',
  'test/http/proxy-keep.test.ts',
  'test/http/fuzz.test.ts',
  'test/web/console.test.ts',
  'test/cli/build.test.ts',
  'test/web/activity.test.ts',
  'test/e2e/uagents-probes.test.ts',
  'test/http/proxy-outages.test.ts',
  'test/http/activity.test.ts',
  'test/e2e/drain.test.ts',
  'test/cli/webhooks.test.ts',
  'test/cli/chat.test.ts',
  'test/web/hosted.test.ts',
  'test/e2e/hosting-real-uagents.test.ts',
  'test/http/authorization.test.ts',
  'test/http/a2a.test.ts',
  'test/http/mailbox-hold.test.ts',
  'test/e2e/hosting-deploy.test.ts',
  'test/http/slow-clients.test.ts',
  'test/cli/activity.test.ts',
  'test/e2e/federation-netns.test.ts',
  'test/http/federation.test.ts',
  'test/e2e/hosting-runner.test.ts',
];

/**
 * How long one file may take before it counts as hung (when files ran one at a time, two
 * minutes). Files that share the cores take several times what they take alone, the longest
 * first (they start together), and more on a machine busy with other work besides.
 */
const TIMEOUT_MS = 300_000;

function allTestFiles(): string[] {
  const root = join(repositoryRoot, 'test');
  return readdirSync(root, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .flatMap((dir) =>
      readdirSync(join(root, dir.name))
        .filter((name) => name.endsWith('.test.ts'))
        .map((name) => `test/${dir.name}/${name}`),
    )
    .sort();
}

/** How long each file took, in ms. */
const took = new Map<string, number>();

/** A test that failed: where, which, and why (its error's first lines). */
interface Failure {
  file: string;
  name: string;
  why: string;
}
/** Every failure of the run, repeated at its end, where a long log's tail shows it. */
const failures: Failure[] = [];

interface FailEvent {
  name: string;
  file?: string;
  todo?: boolean | string;
  details: { error?: { failureType?: string; message?: string; cause?: unknown } };
}

/** The failure an event reports, or none for a suite that failed only because a test in it did. */
function failureOf(event: FailEvent): Failure | undefined {
  const error = event.details.error;
  if (error?.failureType === 'subtestsFailed') return undefined;
  const cause = error?.cause instanceof Error ? error.cause : error;
  const why = (cause instanceof Error ? cause.message : String(error?.message ?? cause))
    .split('\n')
    .filter((line) => line.trim() !== '')
    .slice(0, 6)
    .join('\n      ');
  return { file: (event.file && compiled.sourceOf(event.file)) ?? '?', name: event.name, why };
}

/**
 * Runs `files` (as `node --test` does, each in a process of its own), `concurrency` at a time
 * and in the order given; resolves to whether all passed.
 */
async function runFiles(files: string[], concurrency: number): Promise<boolean> {
  if (files.length === 0) return true;
  let passed = true;
  const stream = run({
    files: files.map((file) => compiled.files.get(file)!),
    concurrency,
    timeout: TIMEOUT_MS,
    ...(namePatterns.length > 0 ? { testNamePatterns: namePatterns } : {}),
  });
  stream.on('test:fail', (event: FailEvent) => {
    if (event.todo) return;
    passed = false;
    const failure = failureOf(event);
    if (failure) failures.push(failure);
  });
  // A file's own entry, named by its path, ends with how long the whole file took.
  stream.on('test:complete', (event: { name: string; details: { duration_ms: number } }) => {
    const file = compiled.sourceOf(event.name);
    if (file !== undefined) took.set(file, event.details.duration_ms);
  });
  const reported = stream.compose(reporter());
  reported.pipe(process.stdout, { end: false });
  await finished(reported);
  return passed;
}

/** Drops the databases of this run that a file left behind (one that was stopped, say). */
async function dropLeftDatabases(tag: string): Promise<void> {
  if (!testPgUrl) return;
  const client = new pg.Client(postgresConnection(testPgUrl));
  await client.connect();
  let names: string[];
  try {
    const { rows } = await client.query<{ datname: string }>(
      'select datname from pg_database where starts_with(datname, $1)',
      [runDatabasePrefix(tag)],
    );
    names = rows.map((row) => row.datname);
  } finally {
    await client.end();
  }
  for (const name of names) {
    await runOnPostgres(testPgUrl, `drop database if exists ${name} with (force)`);
  }
}

const args = process.argv.slice(2);
const option = (name: string): string[] =>
  args.filter((arg) => arg.startsWith(`${name}=`)).map((arg) => arg.slice(name.length + 1));
const unknown = args.filter(
  (arg) =>
    arg.startsWith('--') &&
    !['--test-name-pattern', '--test-reporter'].includes(arg.split('=')[0]!),
);
if (unknown.length > 0) {
  throw new Error(
    `unknown options ${unknown.join(' ')}: --test-name-pattern=<pattern> and --test-reporter=spec|tap|dot are known`,
  );
}
const namePatterns = option('--test-name-pattern');
const reporterName = option('--test-reporter').at(-1) ?? (process.stdout.isTTY ? 'spec' : 'tap');
/** A new reporter of the name asked for (as `node --test` reports: spec on a terminal, or TAP). */
const reporter = () => {
  if (reporterName === 'spec') return new spec();
  if (reporterName === 'tap') return tap;
  if (reporterName === 'dot') return dot;
  throw new Error(`unknown reporter ${reporterName}: spec, tap or dot`);
};
const named = args
  .filter((arg) => !arg.startsWith('--'))
  .map((arg) => relative(repositoryRoot, join(process.cwd(), arg)));
const files = named.length > 0 ? named : allTestFiles();
const gone = [...ALONE, ...LONGEST].filter((file) => !allTestFiles().includes(file));
if (gone.length > 0) {
  throw new Error(`test/run.ts names files there are not: ${gone.join(', ')}`);
}

const concurrency = Number(process.env.AGENTRY_TEST_CONCURRENCY ?? availableParallelism() + 1);
if (!Number.isInteger(concurrency) || concurrency < 1) {
  throw new Error(`AGENTRY_TEST_CONCURRENCY must be a whole number of files, not ${concurrency}`);
}

// Built once, here: files that found them missing or stale would each build them at once,
// over one another.
ensureServerBuild();
ensureWebBuild();

// The files' processes take their environment from this one's.
const runTag = randomBytes(4).toString('hex');
process.env.AGENTRY_TEST_RUN = runTag;

// The test files run compiled, without tsx's loader (test/kit/compiled-tests.ts says why).
// node:test starts each file's process with this process's Node options (on Node 20 they
// cannot be given to run()), so those are what the compiled files need instead of tsx.
const compiled: CompiledTests = await compileTests(files, runTag);
process.execArgv = ['--enable-source-maps'];
const rank = (file: string): number => {
  const i = LONGEST.indexOf(file);
  return i === -1 ? LONGEST.length : i;
};
const together = files
  .filter((file) => !ALONE.includes(file))
  .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
const alone = files.filter((file) => ALONE.includes(file));

let passed = false;
try {
  const concurrent = await runFiles(together, concurrency);
  const serial = await runFiles(alone, 1);
  passed = concurrent && serial;
} finally {
  compiled.remove();
  await dropLeftDatabases(runTag);
}
// On stderr, beside whatever the reporter writes: which files to keep in LONGEST.
const byTime = [...took].sort(([, a], [, b]) => b - a);
const slowest = byTime.slice(0, 12);
console.error(
  `The slowest files (${concurrency} at a time, then ${alone.length} alone):\n${slowest
    .map(([file, ms]) => `  ${(ms / 1000).toFixed(1).padStart(6)} s  ${file}`)
    .join('\n')}`,
);
if (failures.length > 0) {
  console.error(
    `${failures.length} failed:\n${failures
      .map(({ file, name, why }) => `  ${file}: ${name}\n      ${why}`)
      .join('\n')}`,
  );
}
// Every file's time, for a closer look at where a run's time goes.
if (process.env.AGENTRY_TEST_TIMES) {
  writeFileSync(
    process.env.AGENTRY_TEST_TIMES,
    `${JSON.stringify(Object.fromEntries(byTime.map(([file, ms]) => [file, Math.round(ms)])), null, 2)}\n`,
  );
}
process.exitCode = passed ? 0 : 1;
