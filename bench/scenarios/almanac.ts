import { postsOf, runLoad, runPaced, type LoadResult, type PacedOptions } from '../lib/load.js';
import { throughputMeasure } from '../lib/report.js';
import { signInWorkers } from '../lib/signing.js';
import { TestIdentity } from '../../test/kit/uagent.js';
import type { Scenario } from './scenario.js';

const REGISTRANTS = 50;
const WARMUP_REGISTRATIONS = 2_000;
const SATURATING_REGISTRATIONS = 10_000;
/** A steady load well within what either store serves: 20 a second from each registrant. */
const PACED_RATE = 1_000;
const PACED_REGISTRATIONS = 5_000;
/** Look-ups as `ctx.send` makes them (`GET /v1/almanac/agents/{address}`), from 16 clients. */
const LOOKUP_CLIENTS = 16;
const WARMUP_LOOKUPS = 2_000;
const LOOKUPS = 10_000;

let workload: Promise<string[]> | undefined;

/**
 * Registrations as uAgents signs them, each by a new agent, signed when the run starts and
 * shared by every store (each store starts empty, so every one is news to it).
 */
function registrations(): Promise<string[]> {
  workload ??= signInWorkers(
    {
      kind: 'registrations',
      seedPrefix: 'bench almanac agent',
      timestamp: Math.floor(Date.now() / 1000),
      protocols: [
        'proto:a03398ea81d7aaaf67e72940937676eae0d019f8e1d8b5efbadfef9fd2e98bb2',
        'proto:0b2b7f2c1a4e6d0e2b0f4a3a5c0e8d7f6b5a4c3d2e1f0a9b8c7d6e5f4a3b2c1d',
      ],
      endpoint: 'http://127.0.0.1:8001/submit',
    },
    WARMUP_REGISTRATIONS + SATURATING_REGISTRATIONS + PACED_REGISTRATIONS,
  );
  return workload;
}

/**
 * The scenario's registrations (below): a warm-up, then flat out, then at a steady 1,000 a
 * second, each by an agent new to `service`; `onPacedAnswer` is told of each paced one's
 * timing. Answers the bodies sent, and the two measured runs.
 */
export async function registerAsTheScenarioDoes(
  service: { url: string; pid: number },
  onPacedAnswer?: PacedOptions['onAnswer'],
): Promise<{ bodies: string[]; saturated: LoadResult; paced: LoadResult }> {
  const bodies = await registrations();
  const common = { url: service.url, connections: REGISTRANTS, expectStatus: 200 };
  const registrationOf = postsOf('/v1/almanac/agents', bodies);
  await runLoad({
    ...common,
    until: { requests: WARMUP_REGISTRATIONS },
    request: registrationOf(0),
  });
  const saturated = await runLoad({
    ...common,
    until: { requests: SATURATING_REGISTRATIONS },
    request: registrationOf(WARMUP_REGISTRATIONS),
    cpuOfPid: service.pid,
  });
  const paced = await runPaced({
    ...common,
    rate: PACED_RATE,
    requests: PACED_REGISTRATIONS,
    request: registrationOf(WARMUP_REGISTRATIONS + SATURATING_REGISTRATIONS),
    cpuOfPid: service.pid,
    ...(onPacedAnswer && { onAnswer: onPacedAnswer }),
  });
  return { bodies, saturated, paced };
}

/**
 * Almanac registration by 50 registrants at once, each request a signed registration of an
 * agent the Almanac has not seen (a signature check and an upsert each): first as fast as
 * the service answers, which gives its capacity (and latencies that are mostly the queue of
 * 50: a closed loop's mean latency is 50 ÷ throughput), then at a steady 1,000 a second,
 * which gives the latency a registrant sees under load. Then look-ups, as a sender's resolver
 * makes them, by 16 clients as fast as the service answers: of the agents registered (the
 * local path), and of addresses nobody registered (the 404 a sender meets before anything
 * else is asked).
 */
export const almanacScenario: Scenario = {
  name: 'almanac',
  async run({ service, dialect }) {
    const { bodies, saturated, paced } = await registerAsTheScenarioDoes(service);
    // The agents registered above, and as many addresses that never were.
    const addresses = bodies
      .slice(WARMUP_REGISTRATIONS, WARMUP_REGISTRATIONS + SATURATING_REGISTRATIONS)
      .map((body) =>
        addressOf((JSON.parse(body) as { agent_identifier: string }).agent_identifier),
      );
    const strangers = Array.from(
      { length: 1_000 },
      (_, i) => TestIdentity.fromSeed(`bench almanac stranger ${i}`).address,
    );
    const lookup =
      (of: string[], expectStatus: number) => async (requests: number, cpuOfPid?: number) =>
        runLoad({
          url: service.url,
          connections: LOOKUP_CLIENTS,
          expectStatus,
          until: { requests },
          request: (index) => ({
            method: 'GET',
            path: `/v1/almanac/agents/${of[(index * 7919) % of.length]}`,
          }),
          ...(cpuOfPid !== undefined && { cpuOfPid }),
        });
    await lookup(addresses, 200)(WARMUP_LOOKUPS);
    const found = await lookup(addresses, 200)(LOOKUPS, service.pid);
    const missed = await lookup(strangers, 404)(LOOKUPS, service.pid);
    return [
      throughputMeasure(
        {
          id: 'almanac.register.saturated',
          label: `almanac: registration, ${REGISTRANTS} registrants flat out`,
          store: dialect,
        },
        saturated,
      ),
      throughputMeasure(
        {
          id: 'almanac.register.paced',
          label: `almanac: registration, ${REGISTRANTS} registrants, ${PACED_RATE.toLocaleString('en-US')}/s in all`,
          store: dialect,
        },
        paced,
      ),
      throughputMeasure(
        {
          id: 'almanac.lookup.found',
          label: `almanac: look-up of a registered agent, ${LOOKUP_CLIENTS} clients`,
          store: dialect,
        },
        found,
      ),
      throughputMeasure(
        {
          id: 'almanac.lookup.missed',
          label: `almanac: look-up of an address nobody registered (404), ${LOOKUP_CLIENTS} clients`,
          store: dialect,
        },
        missed,
      ),
    ];
  },
};

/** The address an Almanac identifier names (`agent://agent1…`, or the address alone). */
function addressOf(identifier: string): string {
  return identifier.slice(identifier.lastIndexOf('/') + 1);
}
