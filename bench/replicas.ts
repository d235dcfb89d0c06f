import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { registerAgents } from './lib/agents.js';
import { benchPgUrl, freshDatabase, postgresUnavailable } from './lib/databases.js';
import { seededIdentities } from './lib/envelopes.js';
import { postsOf, runLoad, type LoadResult } from './lib/load.js';
import { machineInfo } from './lib/report.js';
import { buildService, startReplica, startService } from './lib/server.js';
import { signInWorkers } from './lib/signing.js';

/**
 * `npm run bench:replicas`: what a second replica on the same machine costs. Mailbox submits
 * over 64 connections go to one server process on PostgreSQL, then, on the same database, to
 * two processes sharing the cores (32 connections each, as a balancer would split them).
 * Prints the ratio of the two rates and writes bench/results/replicas.json.
 */

const SENDERS = 64;
const TARGETS = 100;
const WARMUP = 4_000;
const MEASURED = 24_000;
const CONNECTIONS = 64;
const resultsPath = fileURLToPath(new URL('./results/replicas.json', import.meta.url));
const progress = (message: string): void => void process.stderr.write(`${message}\n`);

const unavailable = await postgresUnavailable(benchPgUrl);
if (unavailable) {
  progress(`PostgreSQL does not answer at ${benchPgUrl}: ${unavailable}`);
  process.exit(1);
}
const loadAverageAtStart = loadavg()[0]!;
progress('building');
await buildService();
const targets = seededIdentities('bench replicas target', TARGETS);
progress('signing envelopes');
const bodies = await signInWorkers(
  {
    kind: 'envelopes',
    senderSeeds: Array.from({ length: SENDERS }, (_, i) => `bench replicas sender ${i}`),
    targets: targets.map((agent) => agent.address),
    bytes: 600,
  },
  2 * (WARMUP + MEASURED),
);
const submit = postsOf('/v2/agents/mailbox/submit', bodies);

const database = await freshDatabase('postgres');
let one: LoadResult;
let two: LoadResult[];
let twoSeconds: number;
try {
  progress('one process');
  const first = await startService(database);
  try {
    await registerAgents(first, targets);
    const common = { url: first.url, connections: CONNECTIONS, expectStatus: 200 };
    await runLoad({ ...common, until: { requests: WARMUP }, request: submit(0) });
    one = await runLoad({
      ...common,
      until: { requests: MEASURED },
      request: submit(WARMUP),
      cpuOfPid: first.pid,
    });
  } finally {
    await first.stop();
  }

  progress('two processes');
  const replicas = await Promise.all([startReplica(database), startReplica(database)]);
  try {
    const offset = WARMUP + MEASURED;
    const half = (r: number, requests: number, from: number) =>
      runLoad({
        url: replicas[r]!.url,
        connections: CONNECTIONS / 2,
        expectStatus: 200,
        until: { requests },
        request: (index) => submit(from + r * requests)(index),
      });
    await Promise.all([0, 1].map((r) => half(r, WARMUP / 2, offset)));
    const started = performance.now();
    two = await Promise.all([0, 1].map((r) => half(r, MEASURED / 2, offset + WARMUP)));
    twoSeconds = (performance.now() - started) / 1000;
  } finally {
    await Promise.all(replicas.map((replica) => replica.stop()));
  }
} finally {
  await database.drop();
}

const twoRate = (two[0]!.requests + two[1]!.requests) / twoSeconds;
const ratio = twoRate / one.requestsPerSecond;
const results = {
  date: new Date().toISOString(),
  machine: machineInfo(),
  loadAverageAtStart,
  store: 'postgres',
  connections: CONNECTIONS,
  submits: MEASURED,
  oneProcess: {
    requestsPerSecond: one.requestsPerSecond,
    serverCores: one.serverCores,
    p50Ms: one.latencyMs.p50,
    p99Ms: one.latencyMs.p99,
  },
  twoProcesses: {
    requestsPerSecond: twoRate,
    p50Ms: [two[0]!.latencyMs.p50, two[1]!.latencyMs.p50],
    p99Ms: [two[0]!.latencyMs.p99, two[1]!.latencyMs.p99],
  },
  ratio,
};
writeFileSync(resultsPath, JSON.stringify(results, null, 2) + '\n');
process.stdout.write(
  `one process: ${one.requestsPerSecond.toFixed(0)} submits/s; two processes: ${twoRate.toFixed(0)} submits/s; ratio ${ratio.toFixed(3)} (${((1 - ratio) * 100).toFixed(1)} % lost)\n`,
);
