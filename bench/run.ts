import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { redactUrl } from '../src/config/index.js';
import type { DialectName, Store } from '../src/store/index.js';
import { measureCeilings } from './ceilings/index.js';
import { benchPgUrl, freshDatabase, postgresUnavailable } from './lib/databases.js';
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
 */

const resultsPath = fileURLToPath(new URL('./results/latest.json', import.meta.url));
const started = performance.now();
const progress = (message: string): void => {
  const seconds = ((performance.now() - started) / 1000).toFixed(0).padStart(4);
  process.stderr.write(`[${seconds} s] ${message}\n`);
};

// Other work on the machine slows the server under test; the results record how busy it was.
const loadAverageAtStart = loadavg()[0]!;
const skipped: string[] = [];
const dialects: DialectName[] = ['sqlite'];
const pgProblem = await postgresUnavailable(benchPgUrl);
if (pgProblem === undefined) {
  dialects.push('postgres');
} else {
  const note = `PostgreSQL: ${redactUrl(benchPgUrl)} did not answer (${pgProblem}); set AGENTRY_BENCH_PG_URL to a reachable server to measure it too.`;
  skipped.push(note);
  progress(`skipping ${note}`);
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
  for (const scenario of scenarios) {
    progress(`${scenario.name} on ${dialect}`);
    const database = await freshDatabase(dialect);
    const service = await startService(database, scenario.settings);
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
writeResults(resultsPath, {
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
});
process.stdout.write(`\n${formatTable(measures)}\n\n`);
for (const note of skipped) process.stdout.write(`skipped: ${note}\n`);
progress(`done in ${seconds.toFixed(0)} s; every number is in ${resultsPath}`);
