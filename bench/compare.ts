import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DialectName } from '../src/store/index.js';
import type { Ceilings } from './ceilings/index.js';
import { buildOfRef, workingTreeBuild, type Build } from './lib/builds.js';
import { compareRows, formatCompareTable, type CompareRow } from './lib/compare-report.js';
import { loadProfile } from './lib/load.js';
import { machineInfo, writeResults, type BenchResults, type Measure } from './lib/report.js';
import { profileReport, profilingArgs } from './lib/profile.js';
import { runScenario } from './lib/scenario-run.js';
import type { Scenario } from './scenarios/scenario.js';

/**
 * `npm run bench -- --compare REF [--rounds N] [WORD…]`: the scenarios on REF's build and on
 * this working tree's, alternately, in N rounds (3 unless given), each run on a fresh server
 * over a fresh database. Within a round the two builds run each scenario back to back, the
 * one that goes first changing from round to round, so that a change in the machine's pace
 * falls on both. The table gives, for every figure, both medians with the rounds' spread,
 * the ratio (this tree ÷ REF), and whether the two ranges are apart. Every value of every
 * round goes to bench/results/compare-REF.json, with the command that made it.
 */

export interface CompareOptions {
  ref: string;
  rounds: number;
  scenarios: Scenario[];
  dialects: DialectName[];
  ceilings: () => Promise<Ceilings>;
  progress: (line: string) => void;
  setup: Record<string, unknown>;
  skipped: string[];
  /** Where each server writes a CPU profile (`--cpu-prof`), by scenario, store and build. */
  profilesDir?: string;
}

/** What a compare writes: the rows of the table, and every round's measures of both builds. */
interface CompareResults extends Omit<BenchResults, 'measures'> {
  rows: CompareRow[];
  raw: { base: Measure[][]; head: Measure[][] };
}

/** A scenario that failed on a build is not run on it again; the reason is reported. */
interface Failure {
  build: string;
  scenario: string;
  store: DialectName;
  error: string;
}

export async function compare(options: CompareOptions): Promise<void> {
  const { progress, rounds } = options;
  const started = performance.now();
  progress(`building this working tree and ${options.ref} as \`npm start\` does`);
  const head = await workingTreeBuild();
  const base = await buildOfRef(options.ref, progress);
  const ceilings = await options.ceilings();
  const measures = new Map<Build, Measure[][]>([
    [base, Array.from({ length: rounds }, () => [])],
    [head, Array.from({ length: rounds }, () => [])],
  ]);
  const failures: Failure[] = [];
  const failed = (build: Build, scenario: Scenario, store: DialectName): boolean =>
    failures.some(
      (f) => f.build === build.label && f.scenario === scenario.name && f.store === store,
    );

  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? [base, head] : [head, base];
    for (const dialect of options.dialects) {
      for (const scenario of options.scenarios) {
        for (const build of order) {
          if (failed(build, scenario, dialect)) continue;
          progress(`round ${round + 1}/${rounds}: ${scenario.name} on ${dialect}, ${build.label}`);
          const profileDir = options.profilesDir
            ? join(options.profilesDir, `${scenario.name} ${dialect} ${build.label}`)
            : undefined;
          // The profiles of this compare's rounds, not summed with an earlier run's.
          if (profileDir && round === 0) rmSync(profileDir, { recursive: true, force: true });
          try {
            const run = await runScenario({
              build,
              scenario,
              dialect,
              ceilings,
              profile: loadProfile,
              nodeArgs: profileDir ? profilingArgs(profileDir) : [],
            });
            measures.get(build)![round]!.push(...run.measures);
          } catch (err) {
            const error = (err as Error).message.split('\n')[0]!;
            progress(`  failed on ${build.label}, not run on it again: ${error}`);
            failures.push({ build: build.label, scenario: scenario.name, store: dialect, error });
          }
        }
      }
    }
  }

  const rows = compareRows(measures.get(base)!, measures.get(head)!);
  const seconds = (performance.now() - started) / 1000;
  const name = options.ref.replace(/[^A-Za-z0-9._-]+/g, '-');
  const path = fileURLToPath(new URL(`./results/compare-${name}.json`, import.meta.url));
  const results: CompareResults = {
    date: new Date().toISOString(),
    seconds,
    machine: machineInfo(),
    setup: {
      ...options.setup,
      command: `npm run bench -- ${process.argv
        .slice(2)
        .map((arg) => (/\s/.test(arg) ? `"${arg}"` : arg))
        .join(' ')}`,
      rounds,
      base: { ref: options.ref, commit: base.commit },
      head: { ref: head.label, commit: head.commit },
    },
    skipped: [
      ...options.skipped,
      ...failures.map((f) => `${f.scenario} on ${f.store} failed on ${f.build}: ${f.error}`),
    ],
    rows,
    raw: { base: measures.get(base)!, head: measures.get(head)! },
  };
  writeResults(path, results);
  const baseLabel = `${options.ref} (${base.commit})`;
  const headLabel = `${head.label} (${head.commit})`;
  process.stdout.write(`\n${formatCompareTable(rows, baseLabel, headLabel)}\n\n`);
  if (options.profilesDir) {
    for (const dialect of options.dialects) {
      for (const scenario of options.scenarios) {
        for (const build of [base, head]) {
          const dir = join(options.profilesDir, `${scenario.name} ${dialect} ${build.label}`);
          if (failed(build, scenario, dialect) || !existsSync(dir)) continue;
          process.stdout.write(
            `${scenario.name} on ${dialect}, ${build.label}, main thread: ${profileReport(dir)}\n\n`,
          );
        }
      }
    }
  }
  for (const failure of failures) {
    process.stdout.write(
      `not compared: ${failure.scenario} on ${failure.store}, failed on ${failure.build}: ${failure.error}\n`,
    );
  }
  progress(`done in ${seconds.toFixed(0)} s; every value of every round is in ${path}`);
}
