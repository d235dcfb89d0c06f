import type { DialectName } from '../src/store/index.js';
import { registerAgents } from './lib/agents.js';
import { benchStores, freshDatabase } from './lib/databases.js';
import { seededIdentities } from './lib/envelopes.js';
import { runLoad, type LoadResult } from './lib/load.js';
import { buildService, startService, type RunningService } from './lib/server.js';
import { signInWorkers } from './lib/signing.js';

/**
 * `npx tsx bench/trace-submit.ts`: what the delivery trace costs the submit path, end to
 * end. Two servers run side by side, one with the trace (the default) and one with
 * `AGENTRY_DELIVERY_TRACE=false`, each over its own fresh database with the same 100 agents;
 * both get the same signed ~600-byte envelopes at 64 connections, in rounds that alternate
 * which goes first, so that the machine's other load falls on both alike. Reported per
 * variant: submits per second over all rounds, and the server's CPU time per submit.
 */

const ROUNDS = 8;
const BLOCK = 2_500;
const WARMUP = 2_000;
const CONNECTIONS = 64;

interface Variant {
  name: 'on' | 'off';
  service: RunningService;
  runs: LoadResult[];
}

async function measure(dialect: DialectName, bodies: string[]): Promise<string> {
  const targets = seededIdentities('bench submit target', 100);
  const variants: Variant[] = [];
  const databases = [];
  try {
    for (const name of ['on', 'off'] as const) {
      const database = await freshDatabase(dialect);
      databases.push(database);
      const settings: Record<string, string> =
        name === 'off' ? { AGENTRY_DELIVERY_TRACE: 'false' } : {};
      const service = await startService(database, settings);
      variants.push({ name, service, runs: [] });
      await registerAgents(service, targets);
    }
    const load = (variant: Variant, offset: number, requests: number) =>
      runLoad({
        url: variant.service.url,
        connections: CONNECTIONS,
        until: { requests },
        expectStatus: 200,
        request: (index) => ({
          method: 'POST',
          path: '/v2/agents/mailbox/submit',
          body: bodies[offset + index],
        }),
        cpuOfPid: variant.service.pid,
      });
    for (const variant of variants) await load(variant, 0, WARMUP);
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 ? [...variants].reverse() : variants;
      for (const variant of order) {
        variant.runs.push(await load(variant, WARMUP + round * BLOCK, BLOCK));
      }
    }
    const summary = (variant: Variant) => {
      const requests = variant.runs.reduce((sum, run) => sum + run.requests, 0);
      const seconds = variant.runs.reduce((sum, run) => sum + run.seconds, 0);
      const cpu = variant.runs.reduce((sum, run) => sum + run.serverCores! * run.seconds, 0);
      return { perSecond: requests / seconds, cpuUs: (cpu / requests) * 1e6 };
    };
    const [on, off] = [summary(variants[0]!), summary(variants[1]!)];
    return `${dialect}: ${ROUNDS} alternating rounds of ${BLOCK} submits at ${CONNECTIONS} connections: trace off ${off.perSecond.toFixed(0)} req/s, ${off.cpuUs.toFixed(0)} µs server CPU per submit; trace on ${on.perSecond.toFixed(0)} req/s (${(((on.perSecond - off.perSecond) / off.perSecond) * 100).toFixed(1)} %), ${on.cpuUs.toFixed(0)} µs (${(((on.cpuUs - off.cpuUs) / off.cpuUs) * 100).toFixed(1)} %)`;
  } finally {
    for (const variant of variants) await variant.service.stop();
    for (const database of databases) await database.drop();
  }
}

await buildService();
const bodies = await signInWorkers(
  {
    kind: 'envelopes',
    senderSeeds: Array.from({ length: 64 }, (_, i) => `bench submit sender ${i}`),
    targets: seededIdentities('bench submit target', 100).map((agent) => agent.address),
    bytes: 600,
  },
  WARMUP + ROUNDS * BLOCK,
);
const { dialects, skipped } = await benchStores();
if (skipped) console.log(`skipping ${skipped}`);
for (const dialect of dialects) console.log(await measure(dialect, bodies));
