import { randomBytes } from 'node:crypto';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { registerAgent } from '../../test/kit/agents.js';
import { call } from '../../test/kit/http.js';
import { TestIdentity } from '../../test/kit/uagent.js';
import { startBenchChatAgent } from '../lib/chat-agent.js';
import { openEventStream, type OpenEventStream } from '../lib/event-stream.js';
import { seededIdentities } from '../lib/envelopes.js';
import { runLoad, type LoadResult } from '../lib/load.js';
import { processCpuSeconds } from '../lib/proc.js';
import { throughputMeasure, type Measure } from '../lib/report.js';
import { openMailboxes } from '../lib/seed.js';
import type { RunningService } from '../lib/server.js';
import { signInWorkers } from '../lib/signing.js';
import { median, summarize, type LatencySummary } from '../lib/stats.js';
import { medianRate, medianRun } from './activity.js';
import type { Scenario } from './scenario.js';

/**
 * Chat for people (docs/chat.md): a person's message to an agent and the agent's reply back
 * on the session's live stream, and many sessions followed live beside the mailbox's load.
 */

/** The sealing key of the chat identities: PostgreSQL keeps none beside the database. */
const HOSTING_KEY = randomBytes(32).toString('hex');

// ---- A session's live stream ---------------------------------------------------------------

/**
 * Follows a session's stream (`GET /v2/chat/sessions/{id}/stream`) as a browser's EventSource
 * does; `onEntry` hears each entry's event name and data as it arrives.
 */
export function followSession(
  service: RunningService,
  sessionId: string,
  onEntry?: (event: string, data: string) => void,
): Promise<OpenEventStream> {
  return openEventStream(service, `/v2/chat/sessions/${sessionId}/stream`, onEntry);
}

/** Opens a session of the service's first user with `agent`; answers its id. */
export async function openSession(service: RunningService, agent: string): Promise<string> {
  const opened = await call(service.url, 'POST', '/v2/chat/sessions', {
    key: service.apiKey,
    body: { agent },
  });
  if (opened.status !== 201) {
    throw new Error(`a chat session was not opened: ${opened.status} ${opened.text}`);
  }
  return (opened.body as { id: string }).id;
}

/**
 * Sends `text` in the session as a person's client does (`POST /v2/chat/sessions/{id}/messages`
 * over a kept-alive connection of `connections`); fails unless the message was delivered.
 */
export function sendMessage(
  service: RunningService,
  connections: HttpAgent,
  sessionId: string,
  text: string,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${service.url}/v2/chat/sessions/${sessionId}/messages`,
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${service.apiKey}`,
          'content-type': 'application/json',
        },
        agent: connections,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          if (res.statusCode === 201 && body.includes('"failure":null')) resolve();
          else reject(new Error(`a chat message was not delivered: ${res.statusCode} ${body}`));
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ text }));
  });
}

// ---- Round trip ----------------------------------------------------------------------------

const WARMUP_ROUND_TRIPS = 200;
const ROUND_TRIPS = 500;
const CONCURRENT_SESSIONS = 4;
const CONCURRENT_WARMUP = 25;
/** Each concurrent session's, after its warm-up. */
const CONCURRENT_ROUND_TRIPS = 125;
const REPLY_PREFIX = 'echo: ';
/** A reply that has not come by then fails the scenario. */
const REPLY_TIMEOUT_MS = 10_000;
const TARGET_P50_MS = 20;
const TARGET_P99_MS = 50;

/** Round trips measured together, each split into its parts (ms). */
interface RoundTrips {
  /** Sent to its reply arriving on the stream, less the agent's own time: Agentry's share. */
  agentry: number[];
  /** Sent to its reply arriving on the stream. */
  total: number[];
  /** The agent's own time: from receiving the message to beginning its reply's POST. */
  agent: number[];
  /** Of the agent's time, from receiving the message to its acknowledgement being answered. */
  acknowledgement: number[];
  /** Sent to the message's own answer (201). */
  answered: number[];
  /** The server's CPU over them, in cores. */
  serverCores: number;
  /** The machine's load average (1 minute) as they ended: other work slows them. */
  loadAverage: number;
}

/**
 * Chat round trip: a person's message to an agent and its reply back, through Agentry on
 * loopback. The agent is scripted (bench/lib/chat-agent.ts), registered as a proxy agent
 * whose URL is a loopback server of this process: Agentry forwards it the message, it answers
 * 200 at once, acknowledges the message (awaiting the answer, as `ctx.send` does) and replies
 * with the text through Agentry's mailbox endpoint, to the person's chat identity. The person
 * follows the session's stream and sends a message (`POST …/messages`), one at a time; a
 * round trip is timed from the send to its reply's `message` entry (direction `in`, the
 * expected text) arriving on the stream, less the agent's own time (from receiving the
 * message to beginning its reply's POST, its acknowledgement included). 200 round trips warm
 * up, 500 are measured; then four sessions at once, each following its own stream, 25 each to
 * warm up and 125 each measured. Target: p50 under 20 ms, p99 under 50 ms.
 */
export const chatRoundTripScenario: Scenario = {
  name: 'chat round trip',
  settings: {
    // The agent's URL is on loopback.
    AGENTRY_ALLOW_PRIVATE_TARGETS: 'true',
    AGENTRY_HOSTING_KEY: HOSTING_KEY,
  },
  async run({ service, dialect }) {
    const agent = await startBenchChatAgent(service, REPLY_PREFIX);
    const person = new HttpAgent({ keepAlive: true });
    const streams: OpenEventStream[] = [];
    // The round trips waiting for their reply, by the reply's text.
    const waiting = new Map<string, (at: number) => void>();
    const heard = (event: string, data: string): void => {
      if (event !== 'message' || !data.includes('"direction":"in"')) return;
      const entry = JSON.parse(data) as { text: string | null };
      const arrived = entry.text === null ? undefined : waiting.get(entry.text);
      if (!arrived) return;
      waiting.delete(entry.text!);
      arrived(performance.now());
    };
    try {
      const sessions: string[] = [];
      for (let i = 0; i < CONCURRENT_SESSIONS; i++) {
        const id = await openSession(service, agent.address);
        streams.push(await followSession(service, id, heard));
        sessions.push(id);
      }

      const roundTrip = async (sessionId: string, text: string, into?: RoundTrips) => {
        const replyText = `${REPLY_PREFIX}${text}`;
        let timer: NodeJS.Timeout | undefined;
        const reply = new Promise<number>((resolve, reject) => {
          waiting.set(replyText, resolve);
          timer = setTimeout(
            () => reject(new Error(`no reply to "${text}" within ${REPLY_TIMEOUT_MS} ms`)),
            REPLY_TIMEOUT_MS,
          );
        });
        const sent = performance.now();
        try {
          await sendMessage(service, person, sessionId, text);
          const answered = performance.now();
          const arrived = await reply;
          const timing = agent.take(replyText);
          if (!timing) throw new Error(`the agent did not note its reply to "${text}"`);
          const agentMs = timing.replyStartedAt - timing.receivedAt;
          if (!into) return;
          into.total.push(arrived - sent);
          into.agent.push(agentMs);
          into.agentry.push(arrived - sent - agentMs);
          into.acknowledgement.push(timing.acknowledgedAt - timing.receivedAt);
          into.answered.push(answered - sent);
        } finally {
          clearTimeout(timer);
          waiting.delete(replyText);
        }
      };
      const measured = async (work: (into: RoundTrips) => Promise<void>) => {
        const into: RoundTrips = {
          agentry: [],
          total: [],
          agent: [],
          acknowledgement: [],
          answered: [],
          serverCores: 0,
          loadAverage: 0,
        };
        const cpuBefore = processCpuSeconds(service.pid);
        const started = performance.now();
        await work(into);
        const seconds = (performance.now() - started) / 1000;
        into.serverCores = (processCpuSeconds(service.pid) - cpuBefore) / seconds;
        into.loadAverage = loadavg()[0]!;
        return into;
      };

      // One session, one message at a time.
      const [first] = sessions;
      for (let i = 0; i < WARMUP_ROUND_TRIPS; i++) await roundTrip(first!, `warm-up ${i}`);
      const sequential = await measured(async (into) => {
        for (let i = 0; i < ROUND_TRIPS; i++) await roundTrip(first!, `message ${i}`, into);
      });

      // Several sessions at once, each one message at a time.
      const concurrently = async (count: number, label: string, into?: RoundTrips) => {
        await Promise.all(
          sessions.map(async (id, s) => {
            for (let i = 0; i < count; i++) await roundTrip(id, `${label} ${s}.${i}`, into);
          }),
        );
      };
      await concurrently(CONCURRENT_WARMUP, 'warm-up');
      const concurrent = await measured((into) =>
        concurrently(CONCURRENT_ROUND_TRIPS, 'message', into),
      );

      const measure = (id: string, label: string, run: RoundTrips): Measure => {
        const share = summarize(run.agentry);
        const parts = (summary: LatencySummary) => ({ p50: summary.p50, p99: summary.p99 });
        return {
          id,
          label,
          store: dialect,
          value: share.p99,
          unit: 'ms p99',
          latencyMs: parts(share),
          serverCores: run.serverCores,
          details: {
            roundTrips: share.count,
            max: share.max,
            mean: share.mean,
            targetP50Ms: TARGET_P50_MS,
            targetP99Ms: TARGET_P99_MS,
            withAgentMs: { ...parts(summarize(run.total)), max: summarize(run.total).max },
            agentOwnMs: parts(summarize(run.agent)),
            agentAcknowledgementMs: parts(summarize(run.acknowledgement)),
            messageAnsweredMs: parts(summarize(run.answered)),
            loadAverage: run.loadAverage,
          },
        };
      };
      return [
        measure(
          'chat.round_trip',
          `chat: round trip person → agent → person, less the agent's time, 1 session (target p50 < ${TARGET_P50_MS} ms, p99 < ${TARGET_P99_MS} ms)`,
          sequential,
        ),
        measure(
          'chat.round_trip.concurrent',
          `chat: round trip, less the agent's time, ${CONCURRENT_SESSIONS} sessions at once`,
          concurrent,
        ),
      ];
    } finally {
      for (const stream of streams) stream.request.destroy();
      person.destroy();
      await agent.close();
    }
  },
};

// ---- Many sessions followed ----------------------------------------------------------------

const FOLLOWED = 1_000;
/** The mailboxes the submits go to, and their senders. */
const SUBMIT_TARGETS = 1_000;
const SUBMIT_SENDERS = 64;
const WARMUP_SUBMITS = 2_000;
const MEASURED_SUBMITS = 8_000;
/**
 * Rounds of runs, each without streams, with, with, and without again, so that what drifts
 * over the scenario weighs on both sides alike; the rates compared are each side's medians.
 */
const ROUNDS = 2;
const OPEN_BATCH = 100;
/** Sessions opened, and messages sent, at once. */
const SETUP_CONCURRENCY = 8;

/** Runs `work` for each of `items`, `concurrency` at a time. */
async function eachAtOnce<T>(
  items: T[],
  concurrency: number,
  work: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      await work(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/**
 * 1,000 chat sessions followed live: the first user opens 1,000 sessions with a mailbox agent
 * of its own and follows each on its stream (`GET /v2/chat/sessions/{id}/stream`, one
 * connection each), beside the mailbox submit load of the activity streams scenario (signed
 * 600-byte envelopes from 64 senders to 1,000 other agents' mailboxes, over the usual
 * connections, 8,000 a run, after 2,000 to warm up without the streams and 2,000 with them).
 * The first time the streams are open, a message is sent in each session and each stream must
 * have its entry: every one is followed live; during the runs the streams are quiet (their
 * heartbeats aside). Measured: the submit rate with the streams open against the rate without
 * on the same server ({@link ROUNDS} rounds of without, with, with, without; the medians
 * compared). Target: ≥ 0.9.
 */
export const chatSessionsFollowingScenario: Scenario = {
  name: 'chat sessions following',
  settings: {
    AGENTRY_STREAMS_PER_USER: '100000',
    AGENTRY_MAX_CONNECTIONS_PER_ADDRESS: '0',
    AGENTRY_HOSTING_KEY: HOSTING_KEY,
  },
  async run({ service, store, profile, dialect }) {
    const chatAgent = TestIdentity.fromSeed('bench followed chat agent');
    await registerAgent(service, service.apiKey, chatAgent);
    const sessions: string[] = new Array<string>(FOLLOWED);
    await eachAtOnce(sessions, SETUP_CONCURRENCY, async (_, i) => {
      sessions[i] = await openSession(service, chatAgent.address);
    });
    const targets = seededIdentities('bench chat submit target', SUBMIT_TARGETS).map(
      (agent) => agent.address,
    );
    await openMailboxes(store(), targets);
    const total = 2 * WARMUP_SUBMITS + ROUNDS * 4 * MEASURED_SUBMITS;
    const bodies = await signInWorkers(
      {
        kind: 'envelopes',
        senderSeeds: Array.from({ length: SUBMIT_SENDERS }, (_, i) => `bench chat sender ${i}`),
        targets,
        bytes: 600,
      },
      total,
    );
    let offset = 0;
    const submitRun = (count: number): Promise<LoadResult> => {
      const first = offset;
      offset += count;
      return runLoad({
        url: service.url,
        connections: profile.connections,
        until: { requests: count },
        request: (index) => ({
          method: 'POST',
          path: '/v2/agents/mailbox/submit',
          body: bodies[first + index],
        }),
        expectStatus: 200,
        cpuOfPid: service.pid,
      });
    };

    const streams: OpenEventStream[] = [];
    let entries = 0;
    const openAll = async (): Promise<number> => {
      const opened = performance.now();
      for (let i = 0; i < FOLLOWED; i += OPEN_BATCH) {
        const batch = sessions
          .slice(i, i + OPEN_BATCH)
          .map((id) => followSession(service, id, undefined));
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

    const person = new HttpAgent({ keepAlive: true });
    try {
      await submitRun(WARMUP_SUBMITS);
      await openAll();
      // Each stream follows its session live: a message sent in it arrives on it.
      const sending = performance.now();
      await eachAtOnce(sessions, SETUP_CONCURRENCY, (id, i) =>
        sendMessage(service, person, id, `hello ${i}`),
      );
      const deadline = Date.now() + 30_000;
      while (streams.some((stream) => stream.entries < 1)) {
        if (Date.now() > deadline) {
          const quiet = streams.filter((stream) => stream.entries < 1).length;
          throw new Error(`${quiet} of ${FOLLOWED} chat streams did not hear their message`);
        }
        await sleep(50);
      }
      const liveCheckSeconds = (performance.now() - sending) / 1000;
      await submitRun(WARMUP_SUBMITS);
      closeAll();
      await sleep(1000);

      const without: LoadResult[] = [];
      const withStreams: LoadResult[] = [];
      const openSeconds: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        without.push(await submitRun(MEASURED_SUBMITS));
        openSeconds.push(await openAll());
        await sleep(1000);
        for (let i = 0; i < 2; i++) withStreams.push(await submitRun(MEASURED_SUBMITS));
        closeAll();
        await sleep(1000);
        without.push(await submitRun(MEASURED_SUBMITS));
      }
      const withRate = medianRate(withStreams);
      const withoutRate = medianRate(without);
      const withRun = medianRun(withStreams);
      const withoutRun = medianRun(without);
      const rates = (runs: LoadResult[]) => runs.map((run) => Math.round(run.requestsPerSecond));
      const perCpu = (runs: LoadResult[]) =>
        median(runs.map((run) => run.requestsPerSecond / run.serverCores!).sort((a, b) => a - b));
      const withPerCpu = perCpu(withStreams);
      const withoutPerCpu = perCpu(without);
      const label = FOLLOWED.toLocaleString('en-US');
      return [
        {
          ...throughputMeasure(
            {
              id: 'chat.following.submit_without',
              label: `chat: submit, no chat streams (median of ${without.length} runs)`,
              store: dialect,
            },
            withoutRun,
          ),
          value: withoutRate,
        },
        {
          ...throughputMeasure(
            {
              id: 'chat.following.submit_with',
              label: `chat: submit, ${label} chat sessions followed (median of ${withStreams.length} runs)`,
              store: dialect,
            },
            withRun,
          ),
          value: withRate,
        },
        {
          id: 'chat.following.submit_ratio',
          label: `chat: submit throughput, with ÷ without ${label} chat streams (target ≥ 0.9)`,
          store: dialect,
          value: withRate / withoutRate,
          unit: '×',
          higherIsBetter: true,
          details: {
            // In the order they ran: round by round, without, with, with, without.
            withoutRuns: rates(without),
            withRuns: rates(withStreams),
            // Submits per CPU-second of the server, the median of each side's runs: on a busy
            // machine the server gets less of it, and its rate drops with either side.
            perServerCpuSecond: { with: withPerCpu, without: withoutPerCpu },
            perServerCpuSecondRatio: withPerCpu / withoutPerCpu,
            sessions: FOLLOWED,
            secondsToOpen: openSeconds,
            liveCheckSeconds,
            entriesHeard: entries,
            loadAverageAtEnd: loadavg()[0],
            derivedFrom: ['chat.following.submit_without', 'chat.following.submit_with'],
          },
        },
      ];
    } finally {
      closeAll();
      person.destroy();
    }
  },
};
