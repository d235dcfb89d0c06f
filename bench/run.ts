import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { DialectName } from '../src/store/index.js';
import { measureCeilings, type Ceilings } from './ceilings/index.js';
import { workingTreeBuild } from './lib/builds.js';
import { benchStores } from './lib/databases.js';
import { makeIdentities, signedEnvelopes } from './lib/envelopes.js';
import { loadProfile } from './lib/load.js';
import { formatTable, machineInfo, writeResults, type Measure } from './lib/report.js';
import { profileReport, profilingArgs } from './lib/profile.js';
import { runScenario } from './lib/scenario-run.js';
import { scenarios } from './scenarios/index.js';
import type { Scenario } from './scenarios/scenario.js';

/**
 * `npm run bench`: measures the ceilings of this machine, then runs every scenario against
 * a fresh Agentry server on SQLite and, when it answers, PostgreSQL. Progress goes to
 * stderr; the table goes to stdout and every number to bench/results/latest.json.
 * `npm run bench -- WORD…` runs only the scenarios whose names contain one of the words,
 * `--store sqlite|postgres` only that store, and `--cpu-prof` has Node profile each server
 * into bench/results/profiles/; each leaves latest.json alone (for comparing variants, or
 * finding costs, while working on one part). `--out FILE` writes the results of any run
 * to FILE instead (and a partial run's too). `--compare REF` runs the scenarios on REF's
 * build and this tree's alternately instead (bench/compare.ts, docs/performance.md).
 */

const usage = `usage: npm run bench -- [--compare REF [--rounds N]] [--store sqlite|postgres]… [--cpu-prof] [--out FILE] [WORD…]`;

function parseArguments() {
  try {
    const { values, positionals } = parseArgs({
      args: process.argv.slice(2),
      allowPositionals: true,
      options: {
        compare: { type: 'string' },
        rounds: { type: 'string' },
        store: { type: 'string', multiple: true },
        'cpu-prof': { type: 'boolean' },
        out: { type: 'string' },
      },
    });
    const rounds = values.rounds === undefined ? 3 : Number(values.rounds);
    if (!Number.isInteger(rounds) || rounds < 1) throw new Error('--rounds takes a whole number');
    if (values.rounds !== undefined && values.compare === undefined) {
      throw new Error('--rounds goes with --compare');
    }
    if (values.out !== undefined && values.compare !== undefined) {
      throw new Error(
        '--out does not go with --compare (it writes bench/results/compare-REF.json)',
      );
    }
    for (const store of values.store ?? []) {
      if (store !== 'sqlite' && store !== 'postgres') throw new Error(`no store named ${store}`);
    }
    return {
      compare: values.compare,
      rounds,
      stores: values.store as DialectName[] | undefined,
      profiling: values['cpu-prof'] ?? false,
      out: values.out,
      words: positionals,
    };
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${usage}\n`);
    process.exit(2);
  }
}

const args = parseArguments();
const resultsPath =
  args.out !== undefined
    ? resolve(args.out)
    : fileURLToPath(new URL('./results/latest.json', import.meta.url));
const profilesPath = fileURLToPath(new URL('./results/profiles/', import.meta.url));
const started = performance.now();
const progress = (message: string): void => {
  const seconds = ((performance.now() - started) / 1000).toFixed(0).padStart(4);
  process.stderr.write(`[${seconds} s] ${message}\n`);
};

// Other work on the machine slows the server under test; the results record how busy it was.
const loadAverageAtStart = loadavg()[0]!;
const skipped: string[] = [];
const partial =
  args.out === undefined && (args.profiling || args.words.length > 0 || args.stores !== undefined);
const named = scenarios.filter(
  (scenario) => args.words.length === 0 || args.words.some((word) => scenario.name.includes(word)),
);
if (named.length === 0) {
  process.stderr.write(`no scenario's name contains ${args.words.join(' or ')}\n`);
  process.exit(2);
}
const selected = named.filter((scenario) => {
  const reason = scenario.skip?.();
  if (reason !== undefined) {
    skipped.push(reason);
    progress(`skipping ${reason}`);
  }
  return reason === undefined;
});
const available = await benchStores();
if (available.skipped) {
  skipped.push(available.skipped);
  progress(`skipping ${available.skipped}`);
}
const dialects = available.dialects.filter(
  (dialect) => args.stores === undefined || args.stores.includes(dialect),
);

/** The ceilings of this machine: what one core does of each part of a mailbox submit. */
async function ceilingsOfThisMachine(): Promise<Ceilings> {
  progress('measuring ceilings: HTTP, crypto, storage');
  const senders = makeIdentities(64);
  const targets = makeIdentities(100).map((agent) => agent.address);
  return measureCeilings(
    dialects,
    signedEnvelopes(512, { senders, targets }),
    targets,
    loadProfile,
  );
}

const autocannonVersion = (
  createRequire(import.meta.url)('autocannon/package.json') as { version: string }
).version;
const setup = {
  loadGenerator: `autocannon ${autocannonVersion}, one thread on the same machine`,
  ...loadProfile,
  server: 'node dist/agentry.js serve --log-level warn, AGENTRY_RATE_LIMIT_MAX=0',
  stores: dialects,
  loadAverageAtStart,
};

if (args.compare !== undefined) {
  const { compare } = await import('./compare.js');
  await compare({
    ref: args.compare,
    rounds: args.rounds,
    scenarios: selected,
    dialects,
    ceilings: ceilingsOfThisMachine,
    progress,
    setup,
    skipped,
    profilesDir: args.profiling ? profilesPath : undefined,
  });
} else {
  await fullRun(selected);
}

async function fullRun(selected: Scenario[]): Promise<void> {
  progress('building the service as `npm start` does');
  const build = await workingTreeBuild();
  const ceilings = await ceilingsOfThisMachine();
  const profiles: string[] = [];
  const measures: Measure[] = [
    ceilings.http,
    ceilings.crypto,
    ...dialects.flatMap((dialect) => [ceilings.storage[dialect]!, ceilings.submit[dialect]!]),
  ];

  for (const dialect of dialects) {
    const peakRss: Record<string, number> = {};
    for (const scenario of selected) {
      progress(`${scenario.name} on ${dialect}`);
      const profileDir = join(profilesPath, `${scenario.name} ${dialect}`);
      // A profile of this run alone, not summed with an earlier run's.
      if (args.profiling) rmSync(profileDir, { recursive: true, force: true });
      const nodeArgs = args.profiling ? profilingArgs(profileDir) : [];
      const run = await runScenario({
        build,
        scenario,
        dialect,
        ceilings,
        profile: loadProfile,
        nodeArgs,
      });
      measures.push(...run.measures);
      peakRss[scenario.name] = run.peakRss;
      if (args.profiling) {
        profiles.push(`${scenario.name} on ${dialect}, main thread: ${profileReport(profileDir)}`);
      }
    }
    const MiB = 1024 * 1024;
    measures.push({
      id: 'server.peak_rss',
      label: 'server peak RSS',
      store: dialect,
      value: Math.max(...Object.values(peakRss)) / MiB,
      unit: 'MiB',
      details: {
        byScenario: Object.fromEntries(
          Object.entries(peakRss).map(([name, bytes]) => [name, bytes / MiB]),
        ),
      },
    });
  }

  const seconds = (performance.now() - started) / 1000;
  const results = {
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    date: new Date().toISOString(),
    seconds,
    machine: machineInfo(),
    setup,
    skipped,
    measures,
  };
  if (!partial) writeResults(resultsPath, results);
  process.stdout.write(`\n${formatTable(measures)}\n\n`);
  for (const summary of profiles) process.stdout.write(`${summary}\n\n`);
  for (const note of skipped) process.stdout.write(`skipped: ${note}\n`);
  progress(
    partial
      ? `done in ${seconds.toFixed(0)} s (${resultsPath} left as it was${args.profiling ? `; profiles in ${profilesPath}` : ''})`
      : `done in ${seconds.toFixed(0)} s; every number is in ${resultsPath}`,
  );
}
