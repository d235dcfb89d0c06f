import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import type { DialectName } from '../../src/store/index.js';
import type { TestIdentity } from '../../test/kit/uagent.js';
import { registerAgents } from '../lib/agents.js';
import { freshDatabase } from '../lib/databases.js';
import { seededIdentities, signedEnvelopes } from '../lib/envelopes.js';
import { requestOnNewConnection } from '../lib/raw-http.js';
import type { Measure } from '../lib/report.js';
import { startService, type RunningService } from '../lib/server.js';
import { summarize, type LatencySummary } from '../lib/stats.js';
import type { Scenario } from './scenario.js';

const BUSY_AGENTS = 100;
const IDLE_AGENTS = 20;
/** Each busy agent gets a message every 2 to 5 s, at random. */
const GAP_MS = { min: 2000, max: 5000 };
/** The client's sleep between polls. */
const POLL_INTERVAL_MS = 1000;
/** Long enough for an idle agent's held poll (20 s) and its sleep to complete a cycle. */
const HELD_RUN_SECONDS = 24;
const PLAIN_RUN_SECONDS = 12;

interface LoopResult {
  /** Submit sent → envelope in the agent's hands, ms, for every message delivered. */
  latency: LatencySummary;
  /** The same, counted from the submit's 200 instead (negative: the agent had it first). */
  afterAnswer: LatencySummary;
  /** The submits' own latency. */
  submit: LatencySummary;
  delivered: number;
  submitted: number;
  /** Polls per idle agent per minute, from the poll cycles they completed. */
  idlePollsPerMinute: number;
  idleCycles: number;
}

/**
 * Runs `agents` as the uAgents mailbox client runs (poll on a new connection, handle each
 * message and delete it on a new connection, sleep 1 s, again) while senders submit to the
 * busy ones at random moments, for `seconds`; `idle` agents only poll.
 */
async function runMailboxLoops(
  service: RunningService,
  busy: TestIdentity[],
  idle: TestIdentity[],
  seconds: number,
): Promise<LoopResult> {
  const perAgent = Math.ceil((seconds * 1000) / GAP_MS.min) + 2;
  const senders = seededIdentities('bench delivery sender', 16);
  const { envelopes, bodies } = signedEnvelopes(perAgent * busy.length, {
    senders,
    targets: busy.map((agent) => agent.address),
    bytes: 600,
  });
  const sentAt = new Map<string, number>();
  const answeredAt = new Map<string, number>();
  const receivedAt = new Map<string, number>();
  const latencies: number[] = [];
  const submitLatencies: number[] = [];
  const idleCycleMs: number[] = [];
  const stop = new AbortController();
  // Every request of the run listens to it.
  setMaxListeners(0, stop.signal);
  let running = true;
  let submitted = 0;
  const now = Math.floor(Date.now() / 1000);

  const clientLoop = async (agent: TestIdentity, counted: boolean): Promise<void> => {
    const authorization = `Agent ${agent.attestation({ validFrom: now - 60, validTo: now + 3600 })}`;
    const path = `/v2/agents/${agent.address}/mailbox`;
    while (running) {
      const started = performance.now();
      const answer = await requestOnNewConnection(service.url, {
        method: 'GET',
        path,
        headers: { authorization },
        signal: stop.signal,
      }).catch(() => undefined);
      if (!answer || !running) return;
      if (answer.status !== 200)
        throw new Error(`a poll answered ${answer.status}: ${answer.text}`);
      const items = JSON.parse(answer.text) as { uuid: string; envelope: { signature: string } }[];
      const received = performance.now();
      for (const item of items) {
        const sent = sentAt.get(item.envelope.signature);
        if (sent !== undefined) latencies.push(received - sent);
        receivedAt.set(item.envelope.signature, received);
        const deleted = await requestOnNewConnection(service.url, {
          method: 'DELETE',
          path: `${path}/${item.uuid}`,
          headers: { authorization },
          signal: stop.signal,
        }).catch(() => undefined);
        if (!deleted || !running) return;
      }
      await sleep(POLL_INTERVAL_MS);
      if (counted && items.length === 0) idleCycleMs.push(performance.now() - started);
    }
  };

  const submitter = new Pool(service.url, { connections: 16 });
  const senderLoop = async (index: number): Promise<void> => {
    const gap = (): number => GAP_MS.min + Math.random() * (GAP_MS.max - GAP_MS.min);
    await sleep(Math.random() * GAP_MS.max);
    for (let n = 0; running && n < perAgent; n++) {
      const i = n * busy.length + index;
      const signature = envelopes[i]!.signature!;
      const sent = performance.now();
      sentAt.set(signature, sent);
      const response = await submitter.request({
        method: 'POST',
        path: '/v2/agents/mailbox/submit',
        headers: { 'content-type': 'application/json' },
        body: bodies[i],
      });
      const text = await response.body.text();
      if (response.statusCode !== 200)
        throw new Error(`submit answered ${response.statusCode}: ${text}`);
      submitted++;
      answeredAt.set(signature, performance.now());
      submitLatencies.push(performance.now() - sent);
      await sleep(gap());
    }
  };

  const loops = [
    ...busy.map((agent) => clientLoop(agent, false)),
    ...idle.map((agent) => clientLoop(agent, true)),
    ...busy.map((_, index) => senderLoop(index)),
  ];
  const ended = Promise.all(loops);
  await Promise.race([sleep(seconds * 1000), ended]);
  running = false;
  stop.abort();
  await ended;
  await submitter.close();
  const cycles = idleCycleMs.length;
  const cycleMean = idleCycleMs.reduce((sum, ms) => sum + ms, 0) / Math.max(1, cycles);
  const afterAnswer = [...receivedAt].flatMap(([signature, received]) => {
    const answered = answeredAt.get(signature);
    return answered === undefined ? [] : [received - answered];
  });
  return {
    latency: summarize(latencies),
    afterAnswer: summarize(afterAnswer),
    submit: summarize(submitLatencies),
    delivered: latencies.length,
    submitted,
    idlePollsPerMinute: cycles === 0 ? Number.NaN : 60_000 / cycleMean,
    idleCycles: cycles,
  };
}

function deliveryMeasures(
  mode: 'held' | 'hold0',
  label: string,
  run: LoopResult,
  dialect: DialectName,
): Measure[] {
  return [
    {
      id: `mailbox.delivery.${mode}`,
      label: `mailbox: submit→delivered, uAgents loop, ${label}`,
      store: dialect,
      value: run.latency.p50,
      unit: 'ms p50',
      latencyMs: { p50: run.latency.p50, p99: run.latency.p99 },
      details: {
        delivered: run.delivered,
        submitted: run.submitted,
        max: run.latency.max,
        mean: run.latency.mean,
        fromSubmitAnswer: { p50: run.afterAnswer.p50, p99: run.afterAnswer.p99 },
        submitMs: { p50: run.submit.p50, p99: run.submit.p99 },
        agents: BUSY_AGENTS,
      },
    },
    {
      id: `mailbox.idle_polls.${mode}`,
      label: `mailbox: idle agent polls per minute, ${label}`,
      store: dialect,
      value: run.idlePollsPerMinute,
      unit: 'polls/min',
      details: { idleAgents: IDLE_AGENTS, cyclesObserved: run.idleCycles },
    },
  ];
}

/**
 * Mailbox delivery: 100 agents run the uAgents mailbox loop while senders submit to each
 * one every 2 to 5 s, and 20 more agents receive nothing. Measured on a server with the
 * default hold (20 s) and on a second one, over its own fresh database, with
 * AGENTRY_MAILBOX_HOLD_SECONDS=0 (answers at once, as a plain poll): the latency from
 * sending a submit to the envelope being in the agent's hands, the two runs' ratio, and how
 * often an idle agent polls.
 */
export const mailboxDeliveryScenario: Scenario = {
  name: 'mailbox delivery',
  async run({ service, dialect }) {
    const busy = seededIdentities('bench delivery agent', BUSY_AGENTS);
    const idle = seededIdentities('bench delivery idle', IDLE_AGENTS);
    await registerAgents(service, [...busy, ...idle]);
    const held = await runMailboxLoops(service, busy, idle, HELD_RUN_SECONDS);

    const database = await freshDatabase(dialect);
    const plain = await startService(database, { AGENTRY_MAILBOX_HOLD_SECONDS: '0' });
    let unheld: LoopResult;
    try {
      await registerAgents(plain, [...busy, ...idle]);
      unheld = await runMailboxLoops(plain, busy, idle, PLAIN_RUN_SECONDS);
    } finally {
      await plain.stop();
      await database.drop();
    }
    return [
      ...deliveryMeasures('held', 'held polls (20 s)', held, dialect),
      ...deliveryMeasures('hold0', 'hold 0 (plain polls)', unheld, dialect),
      {
        id: 'mailbox.delivery.ratio',
        label: 'mailbox: submit→delivered p50, hold 0 ÷ held',
        store: dialect,
        value: unheld.latency.p50 / held.latency.p50,
        unit: '×',
        // How many times faster held polls deliver than plain ones: the more, the better.
        higherIsBetter: true,
        details: {
          p99Ratio: unheld.latency.p99 / held.latency.p99,
          derivedFrom: ['mailbox.delivery.held', 'mailbox.delivery.hold0'],
        },
      },
    ];
  },
};
