import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Store } from '../src/store/index.js';
import { measureCeilings } from './ceilings/index.js';
import { benchStores, freshDatabase } from './lib/databases.js';
import { makeIdentities, signedEnvelopes } from './lib/envelopes.js';
import { loadProfile } from './lib/load.js';
import { formatTable, machineInfo, writeResults, type Measure } from './lib/report.js';
import { openStore } from './lib/seed.js';
import { buildService, startService } from './lib/server.js';
import { scenarios } from './scenarios/index.js';

/**
 * `npm run bench`: measures the ceilings of this machine, then runs every scenario against
 * a fresh Agentry server on SQLite and, when it answers, PostgreSQL. Progress goes to
 * stderr; the table goes to stdout and every number to bench/results/latest.json.
 * `npm run bench -- WORD…` runs only the scenarios whose names contain one of the words, and
 * `--cpu-prof` has Node profile each server into bench/results/profiles/; either leaves
 * latest.json alone (for comparing variants, or finding costs, while working on one part).
 */

const resultsPath = fileURLToPath(new URL('./results/latest.json', import.meta.url));
const profilesPath = fileURLToPath(new URL('./results/profiles/', import.meta.url));
const started = performance.now();
const progress = (message: string): void => {
  const seconds = ((performance.now() - started) / 1000).toFixed(0).padStart(4);
  process.stderr.write(`[${seconds} s] ${message}\n`);
};

// Other work on the machine slows the server under test; the results record how busy it was.
const loadAverageAtStart = loadavg()[0]!;
const skipped: string[] = [];
const profiling = process.argv.includes('--cpu-prof');
const wanted = process.argv.slice(2).filter((argument) => !argument.startsWith('--'));
const partial = profiling || wanted.length > 0;
const selected = scenarios.filter(
  (scenario) => wanted.length === 0 || wanted.some((word) => scenario.name.includes(word)),
);
const { dialects, skipped: postgresSkipped } = await benchStores();
if (postgresSkipped) {
  skipped.push(postgresSkipped);
  progress(`skipping ${postgresSkipped}`);
}

progress('building the service as `npm start` does');
await buildService();

progress('measuring ceilings: HTTP, crypto, storage');
const senders = makeIdentities(64);
const targets = makeIdentities(100).map((agent) => agent.address);
const ceilings = await measureCeilings(
  dialects,
  signedEnvelopes(512, { senders, targets }),
  targets,
  loadProfile,
);
const measures: Measure[] = [
  ceilings.http,
  ceilings.crypto,
  ...dialects.flatMap((dialect) => [ceilings.storage[dialect]!, ceilings.submit[dialect]!]),
];

for (const dialect of dialects) {
  const peakRss: Record<string, number> = {};
  for (const scenario of selected) {
    progress(`${scenario.name} on ${dialect}`);
    const database = await freshDatabase(dialect);
    const nodeArgs = profiling
      ? ['--cpu-prof', `--cpu-prof-dir=${join(profilesPath, `${scenario.name} ${dialect}`)}`]
      : [];
    const service = await startService(database, scenario.settings, nodeArgs);
    let store: Store | undefined;
    try {
      measures.push(
        ...(await scenario.run({
          dialect,
          service,
          store: () => (store ??= openStore(database.url)),
          profile: loadProfile,
          ceilings,
        })),
      );
    } finally {
      peakRss[scenario.name] = await service.stop();
      await store?.close();
      await database.drop();
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
const autocannonVersion = (
  createRequire(import.meta.url)('autocannon/package.json') as { version: string }
).version;
const results = {
  date: new Date().toISOString(),
  seconds,
  machine: machineInfo(),
  setup: {
    loadGenerator: `autocannon ${autocannonVersion}, one thread on the same machine`,
    ...loadProfile,
    server: 'node dist/cli/main.js serve --log-level warn, AGENTRY_RATE_LIMIT_MAX=0',
    stores: dialects,
    loadAverageAtStart,
  },
  skipped,
  measures,
};
if (!partial) writeResults(resultsPath, results);
process.stdout.write(`\n${formatTable(measures)}\n\n`);
for (const note of skipped) process.stdout.write(`skipped: ${note}\n`);
progress(
  partial
    ? `done in ${seconds.toFixed(0)} s (${resultsPath} left as it was${profiling ? `; profiles in ${profilesPath}` : ''})`
    : `done in ${seconds.toFixed(0)} s; every number is in ${resultsPath}`,
);
