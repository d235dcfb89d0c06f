import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../test/kit/ports.js';
import {
  readyMailboxAgent,
  realClient,
  type RealClient,
  runScript,
  waitFor,
  type RunningScript,
  type ScriptLine,
} from '../../test/kit/real-client.js';
import { processCpuSeconds } from '../lib/proc.js';
import type { Measure } from '../lib/report.js';
import type { RunningService } from '../lib/server.js';
import { summarize, type LatencySummary } from '../lib/stats.js';
import type { Scenario } from './scenario.js';

/**
 * A real agent's round trip through Agentry (issue 45): unmodified uAgents 0.25 agents, each its
 * own process, as their users run them. A pinger (an endpoint agent registered in Agentry's
 * Almanac) sends a Ping with `ctx.send` and times, in its own process, the Pong that comes back:
 * from a mailbox agent (connected with its owner's API key; the Ping goes into its mailbox and
 * reaches it through its held poll), and from an endpoint agent (the Ping posted to its own
 * server) as the baseline. Both answer the same way, `ctx.send(sender, Pong)` to the pinger's
 * endpoint, and every `ctx.send` resolves its destination through Agentry's Almanac: what the
 * mailbox pair adds is the mailbox's way (the submit, the held poll's wake-up and answer, the
 * client's handling of it). Runs with the interpreter AGENTRY_TEST_PYTHON names, as the tests
 * that run the real client do, and is skipped, saying why, where that has no uagents 0.25.
 */

const WARMUP_ROUND_TRIPS = 10;
const ROUND_TRIPS = 200;
/**
 * Responders of each pair, pinged in turn. The real client polls again a second after each
 * poll that brought messages (`MAILBOX_POLL_INTERVAL_SECONDS`); a Ping sent before that would
 * wait in the mailbox for the next poll. With several agents, each is pinged only once its poll
 * is held again, and the round trips follow each other faster than one a second. The endpoint
 * pair has as many, each pinged as seldom: a process that has been idle for a second answers
 * more slowly than one that just answered, and both pairs' responders are alike in that.
 */
const RESPONDERS = 4;
/** How long after an agent's last Pong it is pinged again: its second, with room. */
const MAILBOX_AGAIN_MS = 1_300;
/** A pause after each round trip, so that the next starts with the last one's work done. */
const PAUSE_MS = 80;
/** How long the agents may take to start and be ready, and one round trip at most. */
const START_TIMEOUT_MS = 90_000;
const ROUND_TRIP_TIMEOUT_S = 10;

let found: RealClient | undefined;
/** The real client, looked for on first use (only when the scenario is selected). */
const theClient = (): RealClient =>
  (found ??= realClient('AGENTRY_TEST_PYTHON', { series: '0.25' }));

/**
 * One script for the three parts, `role agentverse port seed [plan]`. The responders print
 * when their handler hears a Ping; the pinger prints every round trip's `perf_counter()`
 * times (the system's monotonic clock, shared by the processes): when `ctx.send` began, when
 * it returned (the Ping's POST answered), and when the Pong's handler ran.
 */
const AGENT_SCRIPT = `
import asyncio, json, sys, time
import aiohttp
from uagents import Agent, Context, Model

role, agentverse, port, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


class Ping(Model):
    n: int


class Pong(Model):
    n: int


def say(**fields):
    print(json.dumps(fields), flush=True)


if role == "mailbox":
    agent = Agent(name="responder", seed=seed, port=port, mailbox=True, agentverse=agentverse)
else:
    agent = Agent(name=role, seed=seed, port=port, agentverse=agentverse,
                  endpoint=[f"http://127.0.0.1:{port}/submit"])


@agent.on_message(Ping)
async def answer(ctx: Context, sender: str, msg: Ping):
    say(heard=msg.n, at=time.perf_counter())
    await ctx.send(sender, Pong(n=msg.n))


waiting = {}


@agent.on_message(Pong)
async def answered(ctx: Context, sender: str, msg: Pong):
    future = waiting.pop(msg.n, None)
    if future is not None and not future.done():
        future.set_result(time.perf_counter())


async def registered(address):
    """Waits until the Almanac resolves the address (the agent registered itself)."""
    async with aiohttp.ClientSession() as session:
        while True:
            async with session.get(f"{agentverse}/v1/almanac/agents/{address}") as resp:
                if resp.status == 200 and (await resp.json()).get("endpoints"):
                    return
            await asyncio.sleep(0.2)


async def ping(ctx, pair, address, n):
    future = asyncio.get_running_loop().create_future()
    waiting[n] = future
    sent = time.perf_counter()
    status = await ctx.send(address, Ping(n=n))
    posted = time.perf_counter()
    answered_at = await asyncio.wait_for(future, ${ROUND_TRIP_TIMEOUT_S})
    say(pair=pair, n=n, sent=sent, posted=posted, answered=answered_at,
        status=str(status.status))
    return answered_at


async def pings(ctx):
    plan = json.loads(sys.argv[5])
    mailboxes, endpoints = plan["mailboxes"], plan["endpoints"]
    await registered(agent.address)
    say(ready=agent.address)
    pongs = [0.0] * len(mailboxes)
    n = 0
    for i in range(plan["count"]):
        turn = i % len(mailboxes)
        await ping(ctx, "endpoint", endpoints[turn], n)
        n += 1
        await asyncio.sleep(plan["pause"])
        due = pongs[turn] + plan["again"] - time.perf_counter()
        if due > 0:
            await asyncio.sleep(due)
        pongs[turn] = await ping(ctx, "mailbox", mailboxes[turn], n)
        n += 1
        await asyncio.sleep(plan["pause"])
    say(done=n)


if role == "pinger":
    @agent.on_event("startup")
    async def start(ctx: Context):
        asyncio.get_running_loop().create_task(pings(ctx))

say(address=agent.address)
agent.run()
`;

/** One round trip as the pinger timed it, in ms from its send. */
interface RoundTrip {
  /** To the responder's handler hearing the Ping. */
  heard: number;
  /** To `ctx.send` returning: the Ping's POST answered (Agentry's submit, or the agent's server). */
  posted: number;
  /** To the Pong's handler: the round trip. */
  answered: number;
}

/** Whether a pair's responders are the mailbox agents or the endpoint agents. */
type Pair = 'mailbox' | 'endpoint';

/** Starts one of the script's agents on a port of its own; answers it with its URL. */
async function startAgent(
  python: string,
  dir: string,
  role: string,
  service: RunningService,
  seed: string,
  plan?: object,
): Promise<{ agent: RunningScript; url: string }> {
  const port = await freePort();
  const args = [role, service.url, String(port), seed, ...(plan ? [JSON.stringify(plan)] : [])];
  return { agent: runScript(python, 'agent.py', args, dir), url: `http://127.0.0.1:${port}` };
}

/** The first line of `agent` that `match` takes, waiting for it. */
function lineOf(agent: RunningScript, what: string, match: (line: ScriptLine) => boolean) {
  return waitFor(
    () => {
      if (agent.child.exitCode !== null) {
        throw new Error(`${what}: the agent exited\n${agent.output()}`);
      }
      return agent.lines.find(match);
    },
    what,
    START_TIMEOUT_MS,
  );
}

/** Waits until Agentry's Almanac resolves `address` to an endpoint. */
function resolvable(service: RunningService, address: string): Promise<true> {
  return waitFor(
    async () => {
      const res = await fetch(`${service.url}/v1/almanac/agents/${address}`);
      if (res.status !== 200) return undefined;
      const body = (await res.json()) as { endpoints?: unknown[] };
      return (body.endpoints?.length ?? 0) > 0 || undefined;
    },
    `the Almanac to resolve ${address}`,
    START_TIMEOUT_MS,
  );
}

/** The round trips of `pair`, past the warm-up, with when its responder heard each Ping. */
function roundTrips(pinger: RunningScript, responders: RunningScript[], pair: Pair): RoundTrip[] {
  const heardAt = new Map<number, number>();
  for (const responder of responders) {
    for (const line of responder.lines) {
      if (typeof line.heard === 'number') heardAt.set(line.heard, line.at as number);
    }
  }
  const lines = pinger.lines.filter((line) => line.pair === pair);
  const measured = lines.slice(WARMUP_ROUND_TRIPS);
  return measured.map((line) => {
    const sent = line.sent as number;
    const heard = heardAt.get(line.n as number);
    if (heard === undefined) throw new Error(`no responder heard Ping ${String(line.n)}`);
    const ms = (at: number) => (at - sent) * 1000;
    return {
      heard: ms(heard),
      posted: ms(line.posted as number),
      answered: ms(line.answered as number),
    };
  });
}

function parts(summary: LatencySummary): { p50: number; p99: number } {
  return { p50: summary.p50, p99: summary.p99 };
}

/** A pair's round trip, its median and p99 as measures, with its legs in the details. */
function pairMeasures(dialect: Measure['store'], pair: Pair, trips: RoundTrip[]): Measure[] {
  const total = summarize(trips.map((trip) => trip.answered));
  const responder =
    pair === 'mailbox'
      ? `mailbox agents (${RESPONDERS} in turn)`
      : `endpoint agents (${RESPONDERS} in turn)`;
  const details = {
    roundTrips: total.count,
    max: total.max,
    mean: total.mean,
    // The legs, from the pinger's send: to the responder's handler, then back to the pinger's.
    toHandlerMs: parts(summarize(trips.map((trip) => trip.heard))),
    backMs: parts(summarize(trips.map((trip) => trip.answered - trip.heard))),
    // To the Ping's POST answered: Agentry's submit for the mailbox, the agent's server otherwise.
    postedMs: parts(summarize(trips.map((trip) => trip.posted))),
  };
  const id = `real_agents.${pair}`;
  return [
    {
      id,
      label: `real agents: Ping → Pong, ${responder}, p50 of ${total.count}`,
      store: dialect,
      value: total.p50,
      unit: 'ms p50',
      latencyMs: parts(total),
      details,
    },
    {
      id: `${id}.p99`,
      label: `real agents: Ping → Pong, ${responder}, p99 of ${total.count}`,
      store: dialect,
      value: total.p99,
      unit: 'ms p99',
      details: { derivedFrom: [id] },
    },
  ];
}

export const realAgentsScenario: Scenario = {
  name: 'mailbox real agents',
  skip: () =>
    theClient().skip === false ? undefined : `mailbox real agents: ${String(theClient().skip)}`,
  async run({ service, dialect }) {
    const { python, version } = theClient();
    const dir = mkdtempSync(join(tmpdir(), 'agentry-bench-real-agents-'));
    writeFileSync(join(dir, 'agent.py'), AGENT_SCRIPT);
    if (python === undefined) throw new Error('the real uAgents client is not there');
    const started: RunningScript[] = [];
    try {
      const seed = (name: string) => `bench real agents ${name} ${Math.random()}`;
      const responders = (role: Pair) =>
        Promise.all(
          Array.from({ length: RESPONDERS }, async (_, i) => {
            const one = await startAgent(python, dir, role, service, seed(`${role} ${i}`));
            started.push(one.agent);
            return one;
          }),
        );
      const [mailboxes, endpoints] = await Promise.all([
        responders('mailbox'),
        responders('endpoint'),
      ]);
      // The owner connects each mailbox agent with their API key, as the inspector does.
      const server = { url: service.url, userKey: service.apiKey };
      const mailboxAddresses = await Promise.all(
        mailboxes.map(({ agent, url }) => readyMailboxAgent(agent, url, server)),
      );
      const endpointAddresses = await Promise.all(
        endpoints.map(async ({ agent }) => {
          const line = await lineOf(agent, 'an endpoint agent to start', (l) => !!l.address);
          await resolvable(service, line.address as string);
          return line.address as string;
        }),
      );

      const count = WARMUP_ROUND_TRIPS + ROUND_TRIPS;
      const plan = {
        mailboxes: mailboxAddresses,
        endpoints: endpointAddresses,
        count,
        pause: PAUSE_MS / 1000,
        again: MAILBOX_AGAIN_MS / 1000,
      };
      const pinger = await startAgent(python, dir, 'pinger', service, seed('pinger'), plan);
      started.push(pinger.agent);
      await lineOf(pinger.agent, 'the pinger to register', (line) => !!line.ready);
      const cpuBefore = processCpuSeconds(service.pid);
      const began = performance.now();
      await waitFor(
        () => {
          if (pinger.agent.child.exitCode !== null) {
            throw new Error(`the pinger exited\n${pinger.agent.output()}`);
          }
          return pinger.agent.lines.find((line) => line.done !== undefined);
        },
        'the round trips',
        count * 2 * ROUND_TRIP_TIMEOUT_S * 1000,
      );
      const seconds = (performance.now() - began) / 1000;
      const serverCores = (processCpuSeconds(service.pid) - cpuBefore) / seconds;
      const failed = pinger.agent.lines.filter(
        (line) => line.pair !== undefined && line.status !== 'DeliveryStatus.DELIVERED',
      );
      if (failed.length > 0)
        throw new Error(`a Ping was not delivered: ${JSON.stringify(failed[0])}`);

      const answering = [...mailboxes, ...endpoints].map(({ agent }) => agent);
      const viaMailbox = roundTrips(pinger.agent, answering, 'mailbox');
      const direct = roundTrips(pinger.agent, answering, 'endpoint');
      const mailboxP50 = summarize(viaMailbox.map((trip) => trip.answered)).p50;
      const directP50 = summarize(direct.map((trip) => trip.answered)).p50;
      return [
        ...pairMeasures(dialect, 'mailbox', viaMailbox),
        ...pairMeasures(dialect, 'endpoint', direct),
        {
          id: 'real_agents.mailbox_added',
          label: 'real agents: what the mailbox adds to the round trip, p50 − p50 (target < 5 ms)',
          store: dialect,
          value: mailboxP50 - directP50,
          unit: 'ms',
          serverCores,
          details: {
            uagents: version,
            respondersPerPair: RESPONDERS,
            loadAverage: loadavg()[0],
            derivedFrom: ['real_agents.mailbox', 'real_agents.endpoint'],
          },
        },
        {
          // Both pairs slow down alike when other work takes the machine's cores: their ratio
          // moves less than the difference between builds measured at different moments.
          id: 'real_agents.mailbox_ratio',
          label: 'real agents: round trip through the mailbox ÷ to an endpoint agent, p50',
          store: dialect,
          value: mailboxP50 / directP50,
          unit: '×',
          details: { derivedFrom: ['real_agents.mailbox', 'real_agents.endpoint'] },
        },
      ];
    } finally {
      for (const agent of started) agent.child.kill('SIGTERM');
      await Promise.all(started.map((agent) => agent.exited));
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
