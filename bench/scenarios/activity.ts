import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { messageUuid } from '../../src/services/mailbox.js';
import type { EnvelopeFields } from '../../src/crypto/index.js';
import { registerAgents } from '../lib/agents.js';
import { seededIdentities } from '../lib/envelopes.js';
import { openEventStream, type OpenEventStream } from '../lib/event-stream.js';
import { runLoad, runPaced, type HttpRequest, type LoadResult } from '../lib/load.js';
import { throughputMeasure, type Measure } from '../lib/report.js';
import { openMailboxes, seedTimeline } from '../lib/seed.js';
import type { RunningService } from '../lib/server.js';
import { signInWorkers } from '../lib/signing.js';
import { median, summarize } from '../lib/stats.js';
import type { Scenario } from './scenario.js';

/**
 * Agent activity (docs/activity.md): events reported by agents, live streams of timelines
 * beside the submits that feed them, and timeline pages over a large store.
 */

// ---- Events ingested -----------------------------------------------------------------------

/** Events a batch carries: what uagents-core sends at most. */
const EVENTS_PER_BATCH = 50;
const EVENT_AGENTS = 100;

/** A batch as uagents-core's `AgentBatchEvents.model_dump_json()` writes it (see the tests). */
function eventBatch(index: number, peers: string[]): string {
  const now = Date.now();
  const events: Record<string, unknown>[] = [];
  for (let i = 0; i < EVENTS_PER_BATCH; i++) {
    const timestamp = new Date(now - (EVENTS_PER_BATCH - i)).toISOString().replace('Z', '123Z');
    // One batch in ten opens with an error, which also moves the agent's presence and status.
    if (i === 0 && index % 10 === 0) {
      events.push({
        id: randomUUID(),
        category: 'user',
        kind: 'error',
        timestamp,
        exception: 'ZeroDivisionError',
        traceback:
          'Traceback (most recent call last):\n  File "agent.py", line 12, in handler\n    1 / 0\nZeroDivisionError: division by zero\n',
        metadata: null,
        message: 'division by zero',
      });
      continue;
    }
    if (i % 10 === 5) {
      events.push({
        id: randomUUID(),
        category: 'user',
        kind: 'info',
        timestamp,
        metadata: null,
        message: 'handled a request',
      });
      continue;
    }
    const peer = peers[(index + i) % peers.length]!;
    events.push({
      id: randomUUID(),
      category: 'system',
      kind: 'message',
      timestamp,
      metadata: {
        direction: i % 2 === 0 ? 'received' : 'sent',
        peer,
        msg_id: randomUUID(),
        session_id: randomUUID(),
      },
      message: `Message ${i % 2 === 0 ? 'received from' : 'sent to'} ${peer}`,
    });
  }
  return JSON.stringify({
    platform: {
      operating_system: {
        name: 'Linux',
        version: '#1 SMP PREEMPT_DYNAMIC',
        release: '6.1.0-13-amd64',
      },
      python_version: '3.11.7',
      processor: 'x86_64',
      nodename: 'worker-1',
      sdk_version: '0.4.2',
    },
    events,
  });
}

/**
 * Events ingested: 100 agents registered through the API send batches of 50 events
 * (`POST /v1/events`, each event new, each request with its agent's attestation, re-used as
 * the uAgents client re-uses one), over the usual connections. Every answer must have
 * accepted the whole batch. Reported: events and requests a second, and the server's CPU per
 * event.
 */
export const activityEventsScenario: Scenario = {
  name: 'activity events',
  // An agent may report 6,000 events a minute by default; the run sends far more.
  settings: { AGENTRY_EVENTS_PER_MINUTE: '1000000000' },
  async run({ service, profile, dialect }) {
    const agents = seededIdentities('bench events agent', EVENT_AGENTS);
    await registerAgents(service, agents);
    const now = Math.floor(Date.now() / 1000);
    const authorizations = agents.map(
      (agent) => `Agent ${agent.attestation({ validFrom: now - 60, validTo: now + 3600 })}`,
    );
    const peers = seededIdentities('bench events peer', 10).map((agent) => agent.address);
    let partial: string | undefined;
    const options = {
      url: service.url,
      connections: profile.connections,
      expectStatus: 200,
      request: (index: number): HttpRequest => ({
        method: 'POST',
        path: '/v1/events',
        headers: { authorization: authorizations[index % EVENT_AGENTS]! },
        body: eventBatch(index, peers),
      }),
      onResponse: (_index: number, body: string) => {
        if (!body.includes(`"accepted":${EVENTS_PER_BATCH}`)) partial ??= body;
      },
    };
    await runLoad({ ...options, until: { seconds: profile.warmupSeconds } });
    const run = await runLoad({
      ...options,
      until: { seconds: profile.durationSeconds },
      cpuOfPid: service.pid,
    });
    if (partial !== undefined) throw new Error(`a batch was not accepted whole: ${partial}`);
    const eventsPerSecond = run.requestsPerSecond * EVENTS_PER_BATCH;
    const cpuMicrosPerEvent = (run.serverCores! * 1e6) / eventsPerSecond;
    return [
      {
        id: 'activity.events',
        label: `activity: events ingested (batches of ${EVENTS_PER_BATCH})`,
        store: dialect,
        value: eventsPerSecond,
        unit: 'events/s',
        latencyMs: { p50: run.latencyMs.p50, p99: run.latencyMs.p99 },
        serverCores: run.serverCores,
        details: {
          batch: EVENTS_PER_BATCH,
          agents: EVENT_AGENTS,
          connections: profile.connections,
          requests: run.requests,
          seconds: run.seconds,
          eventsPerServerCpuSecond: eventsPerSecond / run.serverCores!,
          loadGeneratorCores: run.loadGeneratorCores,
        },
      },
      throughputMeasure(
        {
          id: 'activity.events.requests',
          label: `activity: event batches (POST /v1/events, ${EVENTS_PER_BATCH} events)`,
          store: dialect,
        },
        run,
      ),
      {
        id: 'activity.events.cpu_per_event',
        label: 'activity: server CPU per event ingested',
        store: dialect,
        value: cpuMicrosPerEvent,
        unit: 'µs',
        details: { derivedFrom: ['activity.events'] },
      },
    ];
  },
};

// ---- Live streams --------------------------------------------------------------------------

const STREAMS = 1_000;
/** The agents streamed, each by one stream, and the targets of the submits. */
const STREAMED_AGENTS = 1_000;
const STREAM_SENDERS = 64;
const WARMUP_SUBMITS = 2_000;
const MEASURED_SUBMITS = 8_000;
/**
 * Rounds of runs, each without streams, with, with, and without again, so that what drifts
 * over the scenario (the mailboxes fill, the database's caches and files grow) weighs on both
 * sides alike; the rates compared are the medians of each side's runs.
 */
const ROUNDS = 2;
/** Submits sent at a steady rate to measure how soon their entries reach the streams. */
const PACED_SUBMITS = 2_000;
const PACED_RATE = 200;
const OPEN_BATCH = 100;

/**
 * Opens a stream of `path`; resolves once the server answered 200. `onUuid` hears the message
 * uuid of each entry that has one, as it arrives.
 */
function openStream(
  service: RunningService,
  path: string,
  onUuid: (uuid: string) => void,
): Promise<OpenEventStream> {
  return openEventStream(service, path, (_event, data) => {
    const at = data.indexOf('"uuid":"');
    if (at >= 0) onUuid(data.slice(at + 8, at + 44));
  });
}

/** The median of some runs' rates. */
export function medianRate(runs: LoadResult[]): number {
  return median(runs.map((run) => run.requestsPerSecond).sort((a, b) => a - b));
}

/** The run whose rate is nearest the median (whose latency and CPU are reported). */
export function medianRun(runs: LoadResult[]): LoadResult {
  const median = medianRate(runs);
  return runs.reduce((best, run) =>
    Math.abs(run.requestsPerSecond - median) < Math.abs(best.requestsPerSecond - median)
      ? run
      : best,
  );
}

/**
 * 1,000 open activity streams: one per agent (`GET /v2/agents/{address}/activity/stream`
 * with the owner's key) for 1,000 agents whose mailboxes receive signed submits from 64
 * senders, so that every submit has its entry sent on a stream. Measured: the submit rate with
 * the streams open against the rate without them on the same server ({@link ROUNDS} rounds of
 * without, with, with, without; the medians compared), and the time from a submit being sent
 * to its entry arriving on the stream, at 200 submits a second (and, in the details, in the
 * runs flat out), with the submits' own p99 beside it, with the streams open and without.
 */
export const activityStreamsScenario: Scenario = {
  name: 'activity streams',
  settings: {
    AGENTRY_STREAMS_PER_USER: '100000',
    AGENTRY_MAX_CONNECTIONS_PER_ADDRESS: '0',
  },
  async run({ service, store, profile, dialect }) {
    const targets = seededIdentities('bench stream agent', STREAMED_AGENTS).map((a) => a.address);
    await openMailboxes(store(), targets);
    // Two paced runs: with the streams open, and after them without, for the submits' own latency.
    const total = 2 * WARMUP_SUBMITS + ROUNDS * 4 * MEASURED_SUBMITS + 2 * PACED_SUBMITS;
    const bodies = await signInWorkers(
      {
        kind: 'envelopes',
        senderSeeds: Array.from({ length: STREAM_SENDERS }, (_, i) => `bench stream sender ${i}`),
        targets,
        bytes: 600,
      },
      total,
    );
    const uuidOf = (index: number): string =>
      messageUuid(JSON.parse(bodies[index]!) as EnvelopeFields);

    // When each submit of interest was sent, by its message uuid; and what the streams heard.
    const sentAt = new Map<string, number>();
    let latencies: number[] = [];
    // At a steady rate: when each submit was answered, and how long after its answer (0 when
    // before it) its entry arrived: the streams' own share of the latency.
    const answeredAt = new Map<string, number>();
    const afterAnswer: number[] = [];
    const heard = (uuid: string): void => {
      const sent = sentAt.get(uuid);
      if (sent === undefined) return;
      const now = performance.now();
      latencies.push(now - sent);
      sentAt.delete(uuid);
      const answered = answeredAt.get(uuid);
      if (answered !== undefined) afterAnswer.push(now - answered);
    };

    // The next `count` bodies, each sent once: a timed run notes when each uuid was sent.
    let offset = 0;
    const nextSubmits = (count: number, timed: boolean) => {
      const first = offset;
      offset += count;
      const uuids = timed ? Array.from({ length: count }, (_, i) => uuidOf(first + i)) : [];
      return {
        uuids,
        request: (index: number): HttpRequest => {
          if (timed) sentAt.set(uuids[index]!, performance.now());
          return { method: 'POST', path: '/v2/agents/mailbox/submit', body: bodies[first + index] };
        },
      };
    };
    const submitRun = (count: number, timed: boolean): Promise<LoadResult> =>
      runLoad({
        url: service.url,
        connections: profile.connections,
        until: { requests: count },
        request: nextSubmits(count, timed).request,
        expectStatus: 200,
        cpuOfPid: service.pid,
      });
    // At PACED_RATE; a timed run notes when each answer came, or that its entry came first.
    const pacedRun = (timed: boolean): Promise<LoadResult> => {
      const { uuids, request } = nextSubmits(PACED_SUBMITS, timed);
      return runPaced({
        url: service.url,
        connections: profile.connections,
        rate: PACED_RATE,
        requests: PACED_SUBMITS,
        request,
        expectStatus: 200,
        cpuOfPid: service.pid,
        ...(timed && {
          onAnswer: (index: number) => {
            const uuid = uuids[index]!;
            // Heard before its answer came: no later than the answer.
            if (sentAt.has(uuid)) answeredAt.set(uuid, performance.now());
            else afterAnswer.push(0);
          },
        }),
      });
    };

    const streams: OpenEventStream[] = [];
    let entries = 0;
    const openAll = async (): Promise<number> => {
      const opened = performance.now();
      for (let i = 0; i < STREAMS; i += OPEN_BATCH) {
        const batch = Array.from({ length: Math.min(OPEN_BATCH, STREAMS - i) }, (_, k) =>
          openStream(
            service,
            `/v2/agents/${targets[(i + k) % STREAMED_AGENTS]!}/activity/stream`,
            heard,
          ),
        );
        streams.push(...(await Promise.all(batch)));
      }
      return (performance.now() - opened) / 1000;
    };
    const closeAll = (): void => {
      for (const stream of streams) {
        entries += stream.entries;
        stream.request.destroy();
      }
      streams.length = 0;
    };

    try {
      // Both paths warm, each once: without the streams, then with them open.
      await submitRun(WARMUP_SUBMITS, false);
      await openAll();
      await submitRun(WARMUP_SUBMITS, false);
      closeAll();
      await sleep(1000);
      const without: LoadResult[] = [];
      const withStreams: LoadResult[] = [];
      const openSeconds: number[] = [];
      let flatOutSent = 0;
      let paced: { run: LoadResult; latencies: number[] } | undefined;
      for (let round = 0; round < ROUNDS; round++) {
        without.push(await submitRun(MEASURED_SUBMITS, false));
        openSeconds.push(await openAll());
        await sleep(1000);
        for (let i = 0; i < 2; i++) {
          withStreams.push(await submitRun(MEASURED_SUBMITS, true));
          flatOutSent += MEASURED_SUBMITS;
        }
        // The last entries are still on their way.
        await sleep(2000);
        if (round === ROUNDS - 1) {
          // At a steady rate, in the last round, with the streams still open.
          const flatOut = latencies;
          latencies = [];
          sentAt.clear();
          const run = await pacedRun(true);
          await sleep(2000);
          paced = { run, latencies };
          latencies = flatOut;
        }
        closeAll();
        await sleep(1000);
        without.push(await submitRun(MEASURED_SUBMITS, false));
      }
      // The same steady rate with no stream open: what the submits' own answers take.
      const pacedWithout = await pacedRun(false);
      if (!paced || paced.latencies.length < PACED_SUBMITS) {
        throw new Error(
          `the streams heard ${paced?.latencies.length ?? 0} of ${PACED_SUBMITS} submits sent at ${PACED_RATE}/s`,
        );
      }
      const delivered = summarize(paced.latencies);
      const streamsShare = summarize(afterAnswer);
      const flatOut = summarize(latencies);
      const withRate = medianRate(withStreams);
      const withoutRate = medianRate(without);
      const withRun = medianRun(withStreams);
      const withoutRun = medianRun(without);
      const rates = (runs: LoadResult[]) => runs.map((run) => Math.round(run.requestsPerSecond));

      const label = STREAMS.toLocaleString('en-US');
      return [
        {
          ...throughputMeasure(
            {
              id: 'activity.streams.submit_without',
              label: `activity: submit, no streams (median of ${without.length} runs)`,
              store: dialect,
            },
            withoutRun,
          ),
          value: withoutRate,
        },
        {
          ...throughputMeasure(
            {
              id: 'activity.streams.submit_with',
              label: `activity: submit, ${label} activity streams open (median of ${withStreams.length} runs)`,
              store: dialect,
            },
            withRun,
          ),
          value: withRate,
        },
        {
          id: 'activity.streams.submit_ratio',
          label: `activity: submit throughput, with ÷ without ${label} streams (target ≥ 0.9)`,
          store: dialect,
          value: withRate / withoutRate,
          unit: '×',
          higherIsBetter: true,
          details: {
            // In the order they ran: round by round, without, with, with, without.
            withoutRuns: rates(without),
            withRuns: rates(withStreams),
            perServerCpuSecond: {
              with: withRun.requestsPerSecond / withRun.serverCores!,
              without: withoutRun.requestsPerSecond / withoutRun.serverCores!,
            },
            streams: STREAMS,
            agents: STREAMED_AGENTS,
            secondsToOpen: openSeconds,
            entriesHeard: entries,
            derivedFrom: ['activity.streams.submit_without', 'activity.streams.submit_with'],
          },
        },
        {
          id: 'activity.streams.latency',
          label: `activity: submit to entry on its stream, ${PACED_RATE} submits/s (target p99 < 50 ms)`,
          store: dialect,
          value: delivered.p99,
          unit: 'ms p99',
          latencyMs: { p50: delivered.p50, p99: delivered.p99 },
          serverCores: paced.run.serverCores,
          details: {
            arrivals: delivered.count,
            max: delivered.max,
            submitP50Ms: paced.run.latencyMs.p50,
            submitP99Ms: paced.run.latencyMs.p99,
            afterAnswerP50Ms: streamsShare.p50,
            afterAnswerP99Ms: streamsShare.p99,
            withoutStreams: {
              submitP50Ms: pacedWithout.latencyMs.p50,
              submitP99Ms: pacedWithout.latencyMs.p99,
            },
            flatOut: {
              sent: flatOutSent,
              arrivals: flatOut.count,
              p50: flatOut.p50,
              p99: flatOut.p99,
              max: flatOut.max,
            },
          },
        },
      ];
    } finally {
      closeAll();
    }
  },
};

// ---- Timeline pages ------------------------------------------------------------------------

const TIMELINE_ROWS = 1_000_000;
const TIMELINE_AGENTS = 1_000;
/** The big agent's share of the rows: 200,000; each other agent has about 800. */
const BIG_SHARE = 0.2;
const DAY = 24 * 3600 * 1000;
const PAGE = 100;
const TIMELINE_WARMUP = 1_000;
const TIMELINE_QUERIES = 1_000;
const TIMELINE_TARGET_MS = 10;
/**
 * The kind filters measured: a rare kind (one event in fifty), and the group of failures
 * (refusals and failed forwards in the trace, which has none of them here, and errors).
 */
const KINDS = ['event.error', 'failure'];

/**
 * Timeline pages over 1,000,000 stored rows: 1,000 agents (written straight into the store,
 * registered six and a half days ago) with a week's timeline written straight into the store
 * (three quarters reported events, a quarter trace rows, interleaved in time). One agent has
 * a fifth of the rows (200,000), each other about 800. The owner asks for the newest page of
 * 100 of a typical agent and of the big one, with no filter, with `kind=event.error` and with
 * `kind=failure`, one
 * request at a time (1,000 after 1,000 to warm up). Target: p99 under 10 ms.
 */
export const activityTimelineScenario: Scenario = {
  name: 'activity timeline',
  async run({ service, store, dialect }) {
    const addresses = seededIdentities('bench timeline agent', TIMELINE_AGENTS).map(
      (agent) => agent.address,
    );
    const now = Date.now();
    await openMailboxes(store(), addresses, now - 6.5 * DAY);
    const seeding = performance.now();
    await seedTimeline(store(), {
      addresses,
      rows: TIMELINE_ROWS,
      bigShare: BIG_SHARE,
      from: now - 6 * DAY,
      to: now - 60_000,
    });
    const seedSeconds = (performance.now() - seeding) / 1000;
    const [big, typical] = addresses;
    const authorization = `Bearer ${service.apiKey}`;
    const measures: Measure[] = [];
    const cases = [
      { who: 'typical', address: typical!, rows: (TIMELINE_ROWS * (1 - BIG_SHARE)) / 999 },
      { who: 'big', address: big!, rows: TIMELINE_ROWS * BIG_SHARE },
    ];
    for (const { who, address, rows } of cases) {
      for (const kind of [undefined, ...KINDS]) {
        const path = `/v2/agents/${address}/activity?limit=${PAGE}${kind ? `&kind=${kind}` : ''}`;
        let short: string | undefined;
        const common = {
          url: service.url,
          connections: 1,
          expectStatus: 200,
          request: { method: 'GET' as const, path, headers: { authorization } },
          onResponse: (_index: number, body: string) => {
            // A full page (the next, older, page's cursor is given), but for the rare kind of a
            // typical agent, which has fewer than a page of them.
            const full =
              kind && who === 'typical'
                ? !body.includes('"entries":[]')
                : !body.includes('"next":null');
            if (!full) short ??= body.slice(0, 300);
          },
        };
        await runLoad({ ...common, until: { requests: TIMELINE_WARMUP } });
        const run = await runLoad({
          ...common,
          until: { requests: TIMELINE_QUERIES },
          cpuOfPid: service.pid,
        });
        if (short !== undefined) throw new Error(`a page was not full: ${short}`);
        measures.push({
          id: `activity.timeline.${who}${kind ? `.${kind}` : ''}`,
          label: `activity: timeline page of ${PAGE}, ${who} agent (${Math.round(rows).toLocaleString('en-US')} rows)${kind ? `, kind=${kind}` : ''}`,
          store: dialect,
          value: run.latencyMs.p99,
          unit: 'ms p99',
          latencyMs: { p50: run.latencyMs.p50, p99: run.latencyMs.p99 },
          serverCores: run.serverCores,
          details: {
            storedRows: TIMELINE_ROWS,
            agentRows: Math.round(rows),
            queries: run.requests,
            max: run.latencyMs.max,
            connections: 1,
            targetP99Ms: TIMELINE_TARGET_MS,
            seedSeconds,
          },
        });
      }
    }
    return measures;
  },
};
