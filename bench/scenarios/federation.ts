import { randomBytes } from 'node:crypto';
import { registerAgent } from '../../test/kit/agents.js';
import { signedRegistration } from '../../test/kit/almanac.js';
import { call } from '../../test/kit/http.js';
import { TestIdentity } from '../../test/kit/uagent.js';
import { freshDatabase, type BenchDatabase } from '../lib/databases.js';
import type { Measure } from '../lib/report.js';
import {
  startReplica,
  startService,
  type RunningService,
  type ServingProcess,
} from '../lib/server.js';
import { summarize, type LatencySummary } from '../lib/stats.js';
import type { Scenario } from './scenario.js';

/** Agents B publishes: each is looked up once on A, so that every one of those is uncached. */
const REMOTE_AGENTS = 300;
/** Look-ups timed one after another, from one client, for the local, cached and peer cases. */
const SAMPLES = 1_000;
/** Look-ups before the timed ones, for each case. */
const WARMUP = 200;
/** Long enough that no cached answer expires during the run. */
const CACHE_SECONDS = 3_600;

/** Times `count` GETs of `path` on `url` one after another; each must answer `status`. */
async function timeLookups(
  url: string,
  paths: (index: number) => string,
  count: number,
  headers: Record<string, string> = {},
): Promise<LatencySummary> {
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const res = await fetch(`${url}${paths(i)}`, { headers });
    const text = await res.text();
    samples.push(performance.now() - started);
    if (res.status !== 200) throw new Error(`GET ${paths(i)} answered ${res.status}: ${text}`);
  }
  return summarize(samples);
}

/** The instance's federation address, from its `GET /v2/federation`. */
async function federationAddress(service: ServingProcess): Promise<string> {
  const res = await call(service.url, 'GET', '/v2/federation');
  if (res.status !== 200) throw new Error(`GET /v2/federation answered ${res.status}: ${res.text}`);
  return (res.body as { address: string }).address;
}

/** An agent registered and published on `service`, with its mailbox there as its endpoint. */
async function publishAgent(service: RunningService, agent: TestIdentity): Promise<void> {
  await registerAgent(service, service.apiKey, agent);
  const registration = await call(service.url, 'POST', '/v1/almanac/agents', {
    body: signedRegistration(agent, {
      timestamp: Math.floor(Date.now() / 1000),
      endpoints: [{ url: `${service.url}/v2/agents/mailbox/submit`, weight: 1 }],
    }),
  });
  if (registration.status !== 200) throw new Error(`registration: ${registration.text}`);
  const published = await call(service.url, 'PUT', `/v2/agents/${agent.address}/federation`, {
    key: service.apiKey,
    body: { published: true },
  });
  if (published.status !== 200) throw new Error(`publishing: ${published.text}`);
}

function latencyMeasure(
  id: string,
  label: string,
  dialect: Measure['store'],
  run: LatencySummary,
  details: Record<string, unknown> = {},
): Measure {
  return {
    id,
    label,
    store: dialect,
    value: run.p50,
    unit: 'ms p50',
    latencyMs: { p50: run.p50, p99: run.p99 },
    details: { lookups: run.count, connections: 1, meanMs: run.mean, ...details },
  };
}

/**
 * Federation (docs/federation.md): two instances over fresh databases of the same store, B
 * with 300 published agents and A with B as its peer. Timed on A, one look-up after another
 * from one client: `GET /v1/almanac/agents/{address}` of an agent A has itself (the
 * baseline), of each of B's agents once (not cached yet: A asks B, signed, each time), and of
 * one of B's agents over and over (cached); and on B its own answer to a peer's
 * `GET /v2/federation/agents/{address}` (the benchmark is a peer of B's too, with a key of
 * its own). The targets: uncached within B's own time + 5 ms, cached within 1 ms of local.
 */
export const federationScenario: Scenario = {
  name: 'federation',
  async run({ dialect }) {
    const databases: BenchDatabase[] = [];
    const running: ServingProcess[] = [];
    const freshService = async (settings: Record<string, string>) => {
      const database = await freshDatabase(dialect);
      databases.push(database);
      const service = await startService(database, settings);
      running.push(service);
      return { database, service };
    };
    const stop = async (service: ServingProcess) => {
      running.splice(running.indexOf(service), 1);
      await service.stop();
    };
    try {
      const settingsOf = (extra: Record<string, string>) => ({
        AGENTRY_ALLOW_PRIVATE_TARGETS: 'true',
        AGENTRY_FEDERATION_CACHE_SECONDS: String(CACHE_SECONDS),
        AGENTRY_HOSTING_KEY: randomBytes(32).toString('hex'),
        ...extra,
      });
      // A's identity is made on its first start and kept (sealed) in its database: A starts
      // once to tell it, then again with B as its peer.
      const aSettings = settingsOf({});
      const first = await freshService(aSettings);
      const aAddress = await federationAddress(first.service);
      const aFirstUrl = first.service.url;
      await stop(first.service);

      const benchPeer = TestIdentity.random();
      const { service: b } = await freshService(
        settingsOf({
          AGENTRY_PEERS: `${aFirstUrl}=${aAddress},http://127.0.0.1:9=${benchPeer.address}`,
        }),
      );
      const bAddress = await federationAddress(b);
      const remote = Array.from({ length: REMOTE_AGENTS + 1 }, () => TestIdentity.random());
      for (const agent of remote) await publishAgent(b, agent);

      const a = await startReplica(first.database, {
        ...aSettings,
        AGENTRY_PEERS: `${b.url}=${bAddress}`,
      });
      running.push(a);
      const local = TestIdentity.random();
      const registration = await call(a.url, 'POST', '/v1/almanac/agents', {
        body: signedRegistration(local, { timestamp: Math.floor(Date.now() / 1000) }),
      });
      if (registration.status !== 200) throw new Error(`registration: ${registration.text}`);

      const lookUp = (address: string) => () => `/v1/almanac/agents/${address}`;
      await timeLookups(a.url, lookUp(local.address), WARMUP);
      const localRun = await timeLookups(a.url, lookUp(local.address), SAMPLES);

      const [cachedAgent, ...uncachedAgents] = remote as [TestIdentity, ...TestIdentity[]];
      const peerPath = () => `/v2/federation/agents/${cachedAgent.address}`;
      const asPeer = { authorization: benchPeer.authorization() };
      await timeLookups(b.url, peerPath, WARMUP, asPeer);
      const peerRun = await timeLookups(b.url, peerPath, SAMPLES, asPeer);

      const uncachedRun = await timeLookups(
        a.url,
        (i) => `/v1/almanac/agents/${uncachedAgents[i]!.address}`,
        uncachedAgents.length,
      );

      await timeLookups(a.url, lookUp(cachedAgent.address), WARMUP);
      const cachedRun = await timeLookups(a.url, lookUp(cachedAgent.address), SAMPLES);

      return [
        latencyMeasure(
          'federation.lookup.local',
          'federation: almanac look-up on A, an agent of its own',
          dialect,
          localRun,
        ),
        latencyMeasure(
          'federation.peer.answer',
          'federation: B answers a peer’s look-up of a published agent',
          dialect,
          peerRun,
        ),
        latencyMeasure(
          'federation.lookup.uncached',
          'federation: almanac look-up on A, a peer’s agent, not cached',
          dialect,
          uncachedRun,
          { overP50Ms: uncachedRun.p50 - peerRun.p50, targetOverMs: 5 },
        ),
        latencyMeasure(
          'federation.lookup.cached',
          'federation: almanac look-up on A, a peer’s agent, cached',
          dialect,
          cachedRun,
          { overP50Ms: cachedRun.p50 - localRun.p50, targetOverMs: 1 },
        ),
      ];
    } finally {
      for (const service of running) await service.stop();
      for (const database of databases) await database.drop();
    }
  },
};
