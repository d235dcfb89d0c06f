import { call } from '../../test/kit/http.js';
import { registerAgents } from '../lib/agents.js';
import { seededIdentities, signedEnvelopes } from '../lib/envelopes.js';
import { measureForDuration, type LoadResult } from '../lib/load.js';
import type { Measure } from '../lib/report.js';
import type { RunningService } from '../lib/server.js';
import type { Scenario } from './scenario.js';

const PENDING = 100;
const OTHER_AGENTS = 100;
const SMALL_STORE = 1_000;
const LARGE_STORE = 100_000;
const FIRST_WARMUP_SECONDS = 5;

async function submitAll(service: RunningService, bodies: string[]): Promise<void> {
  for (const body of bodies) {
    const answer = await call(service.url, 'POST', '/v2/agents/mailbox/submit', { rawBody: body });
    if (answer.status !== 200) {
      throw new Error(`submit answered ${answer.status}: ${answer.text.slice(0, 300)}`);
    }
  }
}

function pollMeasure(id: string, label: string, run: LoadResult, dialect: Measure['store']) {
  return {
    id,
    label,
    store: dialect,
    value: run.requestsPerSecond,
    unit: 'polls/s',
    latencyMs: { p50: run.latencyMs.p50, p99: run.latencyMs.p99 },
    serverCores: run.serverCores,
    details: { polls: run.requests, seconds: run.seconds, max: run.latencyMs.max },
  } satisfies Measure;
}

/**
 * Mailbox list: one agent polls its mailbox, which holds 100 messages submitted through the
 * API, one request after another as the uAgents client does, re-using one attestation. It is
 * measured while the store holds 1,000 messages for 100 other agents, then 100,000: the
 * ratio of the two says whether a poll costs more as the store grows.
 */
export const mailboxListScenario: Scenario = {
  name: 'mailbox list',
  async run({ service, seedMessages, profile, dialect }) {
    const [polled] = seededIdentities('bench list agent', 1);
    const others = seededIdentities('bench list other', OTHER_AGENTS);
    const senders = seededIdentities('bench list sender', 8);
    await registerAgents(service, [polled!, ...others]);
    const otherAddresses = others.map((agent) => agent.address);
    const background = signedEnvelopes(OTHER_AGENTS, { senders, targets: otherAddresses });
    const seed = (count: number) =>
      seedMessages({ addresses: otherAddresses, count, envelopes: background.bodies });

    await seed(SMALL_STORE / 2);
    await submitAll(
      service,
      signedEnvelopes(PENDING, { senders, targets: [polled!.address] }).bodies,
    );
    await seed(SMALL_STORE / 2);

    const now = Math.floor(Date.now() / 1000);
    const attestation = polled!.attestation({ validFrom: now - 60, validTo: now + 3600 });
    const poll = {
      url: service.url,
      request: {
        method: 'GET' as const,
        path: `/v2/agents/${polled!.address}/mailbox`,
        headers: { authorization: `Agent ${attestation}` },
      },
      expectStatus: 200,
      cpuOfPid: service.pid,
    };
    const first = await call(service.url, 'GET', poll.request.path, {
      authorization: poll.request.headers.authorization,
    });
    if (first.status !== 200 || first.body.length !== PENDING) {
      throw new Error(`a poll answered ${first.status} with ${first.text.slice(0, 300)}`);
    }
    // The agent's own client polls one request at a time. A fresh server takes seconds of
    // polls to reach its steady pace (measured: p50 fell by nearly half over the first 5 s),
    // so the first run warms up longer.
    const sequential = { ...profile, connections: 1 };
    const small = await measureForDuration(poll, {
      ...sequential,
      warmupSeconds: FIRST_WARMUP_SECONDS,
    });
    await seed(LARGE_STORE - SMALL_STORE);
    const large = await measureForDuration(poll, sequential);

    return [
      pollMeasure(
        'mailbox.list.small_store',
        `mailbox: list ${PENDING} pending, ${SMALL_STORE.toLocaleString('en-US')} others stored`,
        small,
        dialect,
      ),
      pollMeasure(
        'mailbox.list.large_store',
        `mailbox: list ${PENDING} pending, ${LARGE_STORE.toLocaleString('en-US')} others stored`,
        large,
        dialect,
      ),
      {
        id: 'mailbox.list.growth',
        label: `mailbox: list p99, ${LARGE_STORE.toLocaleString('en-US')} ÷ ${SMALL_STORE.toLocaleString('en-US')} stored`,
        store: dialect,
        value: large.latencyMs.p99 / small.latencyMs.p99,
        unit: '×',
        details: {
          p50Ratio: large.latencyMs.p50 / small.latencyMs.p50,
          derivedFrom: ['mailbox.list.small_store', 'mailbox.list.large_store'],
        },
      },
    ];
  },
};
