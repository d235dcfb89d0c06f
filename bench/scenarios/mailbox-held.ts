import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { seededIdentities } from '../lib/envelopes.js';
import { runLoad, type HttpRequest } from '../lib/load.js';
import { residentBytes } from '../lib/proc.js';
import { requestOnNewConnection } from '../lib/raw-http.js';
import { throughputMeasure } from '../lib/report.js';
import { signInWorkers } from '../lib/signing.js';
import { registerAgents } from '../lib/agents.js';
import { openMailboxes } from '../lib/seed.js';
import type { RunningService } from '../lib/server.js';
import type { Scenario } from './scenario.js';

const HELD = 10_000;
/** Agents holding them, 10 polls each: deriving 10,000 keys and attestations takes ~25 s. */
const HOLDERS = 1_000;
const TARGETS = 100;
const SUBMIT_SECONDS = 5;
const SUBMIT_BODIES = 15_000;
const MiB = 1024 * 1024;
const OPEN_BATCH = 500;

/** The server's Prometheus text, as numbers by metric name (one scrape). */
async function scrape(service: RunningService): Promise<Map<string, number>> {
  const answer = await requestOnNewConnection(service.url, { method: 'GET', path: '/metrics' });
  const values = new Map<string, number>();
  for (const row of answer.text.split('\n')) {
    const match = /^([a-zA-Z0-9_:]+) (\S+)$/.exec(row);
    if (match) values.set(match[1]!, Number(match[2]));
  }
  return values;
}

async function metric(service: RunningService, name: string): Promise<number> {
  const value = (await scrape(service)).get(name);
  if (value === undefined) throw new Error(`/metrics has no ${name}`);
  return value;
}

/** The server's V8 heap: in use (live and not yet collected) and reserved. */
async function heapBytes(service: RunningService): Promise<{ used: number; total: number }> {
  const values = await scrape(service);
  const bytes = (name: string): number => {
    const value = values.get(name);
    if (value === undefined) throw new Error(`/metrics has no ${name}`);
    return value;
  };
  return {
    used: bytes('nodejs_heap_size_used_bytes'),
    total: bytes('nodejs_heap_size_total_bytes'),
  };
}

/**
 * Event-loop delay since the previous scrape (prom-client resets it on each one), ms: the
 * time between ticks of a 10 ms timer, so an idle loop reads about 10.
 */
async function eventLoopDelay(service: RunningService) {
  const values = await scrape(service);
  const ms = (name: string): number => (values.get(name) ?? Number.NaN) * 1000;
  return {
    p50: ms('nodejs_eventloop_lag_p50_seconds'),
    p99: ms('nodejs_eventloop_lag_p99_seconds'),
    max: ms('nodejs_eventloop_lag_max_seconds'),
  };
}

/**
 * Held polls at scale: 10,000 polls of empty mailboxes (1,000 agents, 10 each) held open on
 * one server (the hold raised to 120 s so that none ends during the run; each on a connection of
 * its own, as the uAgents client polls). Measured: the server's resident memory and
 * event-loop delay with and without them, and submit throughput (to 100 other agents) with
 * and without them. All of them come from this one client address, so the cap on connections
 * per address is lifted for the run, and each agent may hold its ten (four unless raised).
 */
export const mailboxHeldScenario: Scenario = {
  name: 'mailbox held polls',
  settings: {
    AGENTRY_MAILBOX_HOLD_SECONDS: '120',
    AGENTRY_MAX_CONNECTIONS_PER_ADDRESS: '0',
    AGENTRY_MAX_HELD_POLLS_PER_AGENT: String(HELD / HOLDERS),
  },
  async run({ service, store, profile, dialect }) {
    const targets = seededIdentities('bench held target', TARGETS);
    await registerAgents(service, targets);
    const bodies = await signInWorkers(
      {
        kind: 'envelopes',
        senderSeeds: Array.from({ length: 16 }, (_, i) => `bench held sender ${i}`),
        targets: targets.map((agent) => agent.address),
        bytes: 600,
      },
      SUBMIT_BODIES,
    );
    const holders = seededIdentities('bench held agent', HOLDERS);
    await openMailboxes(
      store(),
      holders.map((agent) => agent.address),
    );
    const now = Math.floor(Date.now() / 1000);
    const authorizations = holders.map(
      (agent) => `Agent ${agent.attestation({ validFrom: now - 60, validTo: now + 3600 })}`,
    );

    let next = 0;
    const submit = (): HttpRequest => ({
      method: 'POST',
      path: '/v2/agents/mailbox/submit',
      body: bodies[next++ % bodies.length],
    });
    const submitRun = () =>
      runLoad({
        url: service.url,
        connections: profile.connections,
        until: { seconds: SUBMIT_SECONDS },
        request: submit,
        expectStatus: 200,
        cpuOfPid: service.pid,
      });
    await runLoad({
      url: service.url,
      connections: profile.connections,
      until: { seconds: 3 },
      request: submit,
      expectStatus: 200,
    });

    const quietRss = residentBytes(service.pid);
    const quietHeap = await heapBytes(service);
    // The event-loop delay of each submit run is read from the server's metrics, reset by
    // the scrape just before it.
    await eventLoopDelay(service);
    const firstWithout = await submitRun();
    const quietDelay = await eventLoopDelay(service);

    const stop = new AbortController();
    // Every request of the run listens to it.
    setMaxListeners(0, stop.signal);
    const opened = performance.now();
    // A poll whose connection fails is sent again.
    const holdOpen = async (i: number): Promise<void> => {
      while (!stop.signal.aborted) {
        const answer = await requestOnNewConnection(service.url, {
          method: 'GET',
          path: `/v2/agents/${holders[i % HOLDERS]!.address}/mailbox`,
          headers: { authorization: authorizations[i % HOLDERS]! },
          signal: stop.signal,
        }).catch(() => undefined);
        if (answer && answer.status !== 200) {
          throw new Error(`a held poll answered ${answer.status}: ${answer.text}`);
        }
        if (answer) return;
        await sleep(100);
      }
    };
    // Opened in batches, each once the server holds nearly all before it: faster, they would
    // overflow the listen backlog and wait out the kernel's connect retries.
    const polls: Promise<void>[] = [];
    try {
      let held = 0;
      for (let i = 0; i < HELD; i++) {
        polls.push(holdOpen(i));
        if (i % OPEN_BATCH !== OPEN_BATCH - 1 && i !== HELD - 1) continue;
        for (;;) {
          held = await metric(service, 'agentry_mailbox_held_polls');
          if (held >= polls.length - OPEN_BATCH / 5) break;
          if (performance.now() - opened > 120_000) {
            throw new Error(`only ${held} of ${polls.length} polls were held after two minutes`);
          }
          await sleep(50);
        }
      }
      while (held < HELD) {
        if (performance.now() - opened > 120_000) {
          throw new Error(`only ${held} of ${HELD} polls were held after two minutes`);
        }
        await sleep(100);
        held = await metric(service, 'agentry_mailbox_held_polls');
      }
      const openSeconds = (performance.now() - opened) / 1000;
      await sleep(1000);
      const heldRss = residentBytes(service.pid);
      const heldHeap = await heapBytes(service);
      await eventLoopDelay(service);
      const withHeld = await submitRun();
      const heldDelay = await eventLoopDelay(service);
      const stillHeld = await metric(service, 'agentry_mailbox_held_polls');
      if (stillHeld < HELD) throw new Error(`${HELD - stillHeld} held polls ended early`);
      // The polls go away, and the run without them is repeated: the first one, right after
      // seeding, is often the slower, and the faster of the two is the baseline.
      stop.abort();
      await Promise.all(polls);
      while ((await metric(service, 'agentry_mailbox_held_polls')) > 0) await sleep(100);
      const secondWithout = await submitRun();
      const without =
        secondWithout.requestsPerSecond > firstWithout.requestsPerSecond
          ? secondWithout
          : firstWithout;

      const label = HELD.toLocaleString('en-US');
      return [
        {
          id: 'mailbox.held.rss',
          label: `mailbox: server RSS with ${label} held polls`,
          store: dialect,
          value: heldRss / MiB,
          unit: 'MiB',
          details: {
            withoutMiB: quietRss / MiB,
            perHeldPollKiB: (heldRss - quietRss) / 1024 / HELD,
            agents: HOLDERS,
            secondsToOpen: openSeconds,
          },
        },
        {
          id: 'mailbox.held.per_poll',
          label: `mailbox: memory per held poll (RSS growth ÷ ${label})`,
          store: dialect,
          value: (heldRss - quietRss) / 1024 / HELD,
          unit: 'KiB',
          details: {
            heapTotalKiB: (heldHeap.total - quietHeap.total) / 1024 / HELD,
            outsideHeapKiB: (heldRss - quietRss - (heldHeap.total - quietHeap.total)) / 1024 / HELD,
          },
        },
        {
          id: 'mailbox.held.heap_per_poll',
          label: 'mailbox: V8 heap used per held poll, garbage included',
          store: dialect,
          value: (heldHeap.used - quietHeap.used) / 1024 / HELD,
          unit: 'KiB',
        },
        {
          id: 'mailbox.held.event_loop_delay',
          label: `mailbox: event-loop delay p99, submits with ${label} held polls`,
          store: dialect,
          value: heldDelay.p99,
          unit: 'ms',
          details: { held: heldDelay, without: quietDelay },
        },
        throughputMeasure(
          {
            id: 'mailbox.held.submit_without',
            label: 'mailbox: submit, no held polls (faster of 2 runs)',
            store: dialect,
          },
          without,
        ),
        throughputMeasure(
          {
            id: 'mailbox.held.submit_with',
            label: `mailbox: submit, ${label} held polls open`,
            store: dialect,
          },
          withHeld,
        ),
        {
          id: 'mailbox.held.submit_ratio',
          label: `mailbox: submit throughput, with ÷ without ${label} held polls`,
          store: dialect,
          value: withHeld.requestsPerSecond / without.requestsPerSecond,
          unit: '×',
          higherIsBetter: true,
          details: {
            withoutRuns: [firstWithout.requestsPerSecond, secondWithout.requestsPerSecond],
            derivedFrom: ['mailbox.held.submit_without', 'mailbox.held.submit_with'],
          },
        },
      ];
    } finally {
      stop.abort();
      await Promise.all(polls);
    }
  },
};
