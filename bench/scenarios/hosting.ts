import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DialectName } from '../../src/store/index.js';
import { call } from '../../test/kit/http.js';
import { standInInterpreter } from '../../test/kit/stand-in.js';
import { registerAgents } from '../lib/agents.js';
import { freshDatabase } from '../lib/databases.js';
import { runLoad, type LoadProfile, type LoadResult } from '../lib/load.js';
import {
  childProcesses,
  processCpuSeconds,
  processTree,
  proportionalBytes,
  residentBytes,
} from '../lib/proc.js';
import { throughputMeasure, type Measure } from '../lib/report.js';
import { startService, type RunningService } from '../lib/server.js';
import { percentile } from '../lib/stats.js';
import { submitWorkload } from './mailbox-submit.js';
import type { Scenario } from './scenario.js';

/**
 * Hosted agents (docs/hosting.md): how soon a started agent polls its mailbox, what an idle
 * one costs in memory, and what 50 of them cost the mailbox's submit rate.
 *
 * The agents run the stand-in `uagents` package of the tests (test/fixtures/hosting/stand-in),
 * not the real one, which the benchmark does not install: the agents' own memory and start-up
 * are the stand-in's (standard library only, far lighter than uAgents with its dependencies).
 * The runner's share of memory and the path from start to first poll (the runner's claim,
 * spawning, the sandbox, the bootstrap, the Almanac registration and the first poll) are the
 * product's. The stand-in polls once a second, as uagents does; its first poll comes as soon as
 * it runs, so the interval does not add to the start, but an idle agent's polls are 1 a second.
 */

/** Agents started one after another, the first poll of each awaited; then held for memory. */
const ONE_BY_ONE = 20;
/** Idle agents beside the submit run; the runner's capacity is raised to them. */
const FLEET = 50;
const WARMUP_SUBMITS = 4_000;
const MEASURED_SUBMITS = 12_000;
/** After the last agent's first poll, before memory is read: its start-up settles. */
const SETTLE_MS = 5_000;
/**
 * How often the runner claims agents to run (its default round): each start waits a random
 * part of it first, so that starts fall anywhere in the runner's round. Started right after
 * the agent before polled, they would fall at the same point of it each time.
 */
const CLAIM_ROUND_MS = 3_000;
/** How long one agent may take from start to first poll before the run fails. */
const FIRST_POLL_TIMEOUT_MS = 60_000;
const MiB = 1024 * 1024;

/** An idle hosted agent: `agent` is the host's (a mailbox agent of this Agentry). */
const IDLE_AGENT = `# An idle hosted agent: it registers, then polls its mailbox once a second.
from uagents import Context


@agent.on_event("startup")
async def started(ctx: Context):
    ctx.logger.info(f"idle agent {ctx.agent.address} is up")
`;

/** The hosting key of every server of the run (PostgreSQL keeps none beside the database). */
const HOSTING_KEY = randomBytes(32).toString('hex');

/** Where sandboxed agents may run from: bubblewrap installed. */
const bwrapInstalled = ['/usr/bin/bwrap', '/bin/bwrap', '/usr/local/bin/bwrap'].some((path) =>
  existsSync(path),
);

interface Scratch {
  /** An interpreter with the stand-in importable. */
  python: string;
  dir: string;
}

let scratch: Scratch | undefined;

/**
 * The run's interpreter and the directory the agents' directories go in, made on first use
 * and removed when the run ends. Both are opened to other users: a runner that runs as root
 * runs sandboxed agents as users of their own.
 */
function hostingScratch(): Scratch {
  if (scratch) return scratch;
  const dir = mkdtempSync(join(tmpdir(), 'agentry-bench-hosting-'));
  chmodSync(dir, 0o755);
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  scratch = { dir, python: standInInterpreter(join(dir, 'python')) };
  return scratch;
}

/** The settings of a server that runs agents, each server with a directory of its own. */
function hostingSettings(sandbox: 'off' | 'bwrap'): Record<string, string> {
  const { dir, python } = hostingScratch();
  return {
    AGENTRY_HOSTING_PYTHON: python,
    AGENTRY_HOSTING_DIR: mkdtempSync(join(dir, 'agents-')),
    AGENTRY_HOSTING_SANDBOX: sandbox,
    AGENTRY_HOSTING_EGRESS: 'agentry',
    AGENTRY_HOSTING_MAX_AGENTS: String(FLEET),
    AGENTRY_HOSTING_KEY: HOSTING_KEY,
  };
}

/** One agent's start: when its start was answered, its process spawned, its first poll came. */
interface StartTiming {
  answeredAt: number;
  firstPollAt: number;
  /** The runner's line saying how the agent is contained, written as it spawns it. */
  spawnedAt?: number;
  /** The bootstrap's word that the agent's code loaded (then the agent runs). */
  loadedAt?: number;
}

/** The owner's side of the run: the Hosting API and the timeline, with the server's key. */
class Owner {
  constructor(private readonly service: RunningService) {}

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const answer = await call<T>(this.service.url, method, path, {
      key: this.service.apiKey,
      body,
    });
    if (answer.status !== 200) {
      throw new Error(`${method} ${path} answered ${answer.status}: ${answer.text}`);
    }
    return answer.body;
  }

  /** A stopped agent with the idle code. */
  async create(name: string): Promise<string> {
    const { address } = await this.call<{ address: string }>('POST', '/v1/hosting/agents', {
      name,
    });
    const code = [{ name: 'agent.py', language: 'python', value: IDLE_AGENT }];
    await this.call('PUT', `/v1/hosting/agents/${address}/code`, { code: JSON.stringify(code) });
    return address;
  }

  /** Starts the agent; answers when the answer came (ms since the epoch, as the server's clock). */
  async start(address: string): Promise<number> {
    await this.call('POST', `/v1/hosting/agents/${address}/start`);
    return Date.now();
  }

  async stop(address: string): Promise<void> {
    await this.call('POST', `/v1/hosting/agents/${address}/stop`);
  }

  /**
   * When the agent's first poll reached the server: the `polling.started` entry of its
   * timeline, dated with the moment the server took the poll (the entry itself is written
   * with the next presence flush, up to a second later). Fails when the agent crashes or
   * fails, with its last log lines.
   */
  async firstPoll(address: string, everyMs: number): Promise<number> {
    const deadline = Date.now() + FIRST_POLL_TIMEOUT_MS;
    for (let asked = 0; ; asked++) {
      const { entries } = await this.call<{ entries: { at: string }[] }>(
        'GET',
        `/v2/agents/${address}/activity?kind=polling.started&limit=1`,
      );
      if (entries.length > 0) return Date.parse(entries[0]!.at);
      const state =
        asked % 10 === 9
          ? (await this.call<{ state: string }>('GET', `/v1/hosting/agents/${address}`)).state
          : undefined;
      if (state === 'failed' || state === 'crashed' || Date.now() > deadline) {
        const lines = await this.logLines(address);
        throw new Error(
          `hosted agent ${address} did not poll its mailbox (state ${state ?? 'not failed'}); its last log lines:\n${lines
            .slice(-15)
            .map((line) => `  ${line.entry}`)
            .join('\n')}`,
        );
      }
      await sleep(everyMs);
    }
  }

  async logLines(address: string): Promise<{ at: number; entry: string }[]> {
    const lines = await this.call<{ log_timestamp: string; log_entry: string }[]>(
      'GET',
      `/v1/hosting/agents/${address}/logs/latest`,
    );
    return lines.map((line) => ({ at: Date.parse(line.log_timestamp), entry: line.log_entry }));
  }

  /** Adds when the runner spawned the agent and when its code loaded, from its log. */
  async withLogTimes(address: string, timing: StartTiming): Promise<StartTiming> {
    const lines = await this.logLines(address);
    const at = (pattern: RegExp) => lines.find((line) => pattern.test(line.entry))?.at;
    return { ...timing, spawnedAt: at(/^limits: /), loadedAt: at(/^code loaded/) };
  }
}

/**
 * Starts `addresses` one after another: each once the one before has polled, after a random
 * wait within the runner's round. Answers the timings, in the order started.
 */
async function startOneByOne(owner: Owner, addresses: string[]): Promise<StartTiming[]> {
  const timings: StartTiming[] = [];
  for (const address of addresses) {
    await sleep(Math.random() * CLAIM_ROUND_MS);
    const answeredAt = await owner.start(address);
    timings.push({ answeredAt, firstPollAt: await owner.firstPoll(address, 50) });
  }
  return Promise.all(addresses.map((address, i) => owner.withLogTimes(address, timings[i]!)));
}

/** Median, p95 (nearest rank), least and most of `samples`. */
function spread(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    min: sorted[0]!,
    max: sorted[sorted.length - 1]!,
  };
}

function startMeasures(
  dialect: DialectName,
  sandbox: string,
  idSuffix: string,
  timings: StartTiming[],
): Measure[] {
  const total = spread(timings.map((t) => t.firstPollAt - t.answeredAt));
  const logged = timings.filter((t) => t.spawnedAt !== undefined && t.loadedAt !== undefined);
  const details = {
    agents: timings.length,
    ms: total,
    samplesMs: timings.map((t) => t.firstPollAt - t.answeredAt),
    // The parts, from the agent's log: the runner's claim (it claims every 3 s), the
    // interpreter and bootstrap up to the code loaded, then the agent's run up to its poll.
    startToSpawnMs: spread(logged.map((t) => t.spawnedAt! - t.answeredAt)),
    spawnToCodeLoadedMs: spread(logged.map((t) => t.loadedAt! - t.spawnedAt!)),
    codeLoadedToFirstPollMs: spread(logged.map((t) => t.firstPollAt - t.loadedAt!)),
    pollIntervalSeconds: 1,
    agentPackage: 'the stand-in uagents (test/fixtures/hosting/stand-in)',
  };
  return [
    {
      id: `hosting.first_poll${idSuffix}`,
      label: `hosting: start → first poll, ${sandbox}, median of ${timings.length}`,
      store: dialect,
      value: total.p50,
      unit: 'ms p50',
      details,
    },
    {
      id: `hosting.first_poll.p95${idSuffix}`,
      label: `hosting: start → first poll, ${sandbox}, p95 of ${timings.length}`,
      store: dialect,
      value: total.p95,
      unit: 'ms p95',
      details: { derivedFrom: [`hosting.first_poll${idSuffix}`] },
    },
  ];
}

/** The memory of the agents a server runs: each is a process it started, with its own children. */
function agentsMemory(serverPid: number, expected: number) {
  const agents = childProcesses(serverPid);
  if (agents.length !== expected) {
    throw new Error(`${expected} hosted agents should run, but the server has ${agents.length}`);
  }
  let rss = 0;
  let pss = 0;
  let processes = 0;
  for (const pid of agents.flatMap((agent) => processTree(agent))) {
    rss += residentBytes(pid);
    pss += proportionalBytes(pid);
    processes += 1;
  }
  return { rss, pss, processes, pids: agents };
}

/** What `count` idle agents cost: their processes' memory, and the server's growth since `before`. */
function memoryWith(serverPid: number, count: number, serverBefore: number) {
  const agents = agentsMemory(serverPid, count);
  const server = residentBytes(serverPid);
  return {
    agents: count,
    agentRssMiB: agents.rss / MiB / count,
    agentPssMiB: agents.pss / MiB / count,
    processesPerAgent: agents.processes / count,
    serverRssMiB: server / MiB,
    serverBeforeMiB: serverBefore / MiB,
    runnerShareMiB: (server - serverBefore) / MiB / count,
  };
}

type Memory = ReturnType<typeof memoryWith>;

/**
 * The agents' memory with {@link ONE_BY_ONE} of them, and the server's share per agent: its
 * growth from `fewer` agents to `more`, which leaves out what a server grows or shrinks by
 * as it serves (the growth since before the first start, per agent, is in the details).
 */
function memoryMeasures(
  dialect: DialectName,
  sandbox: string,
  idSuffix: string,
  fewer: Memory,
  more: Memory,
): Measure[] {
  const memory = fewer.agents === ONE_BY_ONE ? fewer : more;
  const runnerShare = (more.serverRssMiB - fewer.serverRssMiB) / (more.agents - fewer.agents);
  return [
    {
      id: `hosting.memory.agent${idSuffix}`,
      label: `hosting: RSS per idle agent, its processes (${memory.agents}, ${sandbox}, stand-in)`,
      store: dialect,
      value: memory.agentRssMiB,
      unit: 'MiB',
      details: { [`with${fewer.agents}`]: fewer, [`with${more.agents}`]: more },
    },
    {
      id: `hosting.memory.runner${idSuffix}`,
      label: `hosting: server RSS per idle agent, runner's share (${fewer.agents} → ${more.agents}, ${sandbox})`,
      store: dialect,
      value: runnerShare,
      unit: 'MiB',
      details: {
        sinceBeforeFirstStartMiB: {
          [`with${fewer.agents}`]: fewer.runnerShareMiB,
          [`with${more.agents}`]: more.runnerShareMiB,
        },
        derivedFrom: [`hosting.memory.agent${idSuffix}`],
      },
    },
  ];
}

/** Waits until the server runs no agent processes. */
async function untilNoAgents(serverPid: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (childProcesses(serverPid).length > 0) {
    if (Date.now() > deadline) throw new Error('hosted agents still ran a minute after stopping');
    await sleep(200);
  }
}

/** CPU seconds the processes of the server's agents have used so far. */
function agentsCpuSeconds(serverPid: number): number {
  let seconds = 0;
  for (const pid of processTree(serverPid).slice(1)) {
    try {
      seconds += processCpuSeconds(pid);
    } catch {
      // exited meanwhile
    }
  }
  return seconds;
}

/** The submit load of the mailbox submit scenario, each body sent once to this server. */
async function submitRuns(service: RunningService, profile: LoadProfile) {
  const { targets, bodies } = await submitWorkload();
  if (bodies.length < WARMUP_SUBMITS + 3 * MEASURED_SUBMITS) {
    throw new Error('the submit workload has too few bodies for the hosting scenario');
  }
  await registerAgents(service, targets);
  let sent = 0;
  return async (count: number, measured: boolean): Promise<LoadResult> => {
    const offset = sent;
    sent += count;
    return runLoad({
      url: service.url,
      connections: profile.connections,
      until: { requests: count },
      request: (index) => ({
        method: 'POST',
        path: '/v2/agents/mailbox/submit',
        body: bodies[offset + index],
      }),
      expectStatus: 200,
      ...(measured ? { cpuOfPid: service.pid } : {}),
    });
  };
}

/**
 * The sandboxed half, on a server of its own over a fresh database: agents in bubblewrap with
 * egress to this Agentry only, started one after another, then their memory.
 */
async function sandboxed(dialect: DialectName, profile: LoadProfile): Promise<Measure[]> {
  const database = await freshDatabase(dialect);
  const service = await startService(database, hostingSettings('bwrap'));
  try {
    const owner = new Owner(service);
    const addresses: string[] = [];
    for (let i = 0; i < ONE_BY_ONE; i++) addresses.push(await owner.create(`idle ${i}`));
    // The server's memory before the agents is read once it has served a while, as on the
    // scenario's own server: a server just started grows as it first serves.
    const submit = await submitRuns(service, profile);
    await submit(WARMUP_SUBMITS, false);
    await sleep(1000);
    const before = residentBytes(service.pid);
    const half = ONE_BY_ONE / 2;
    const timings = await startOneByOne(owner, addresses.slice(0, half));
    await sleep(SETTLE_MS);
    const fewer = memoryWith(service.pid, half, before);
    timings.push(...(await startOneByOne(owner, addresses.slice(half))));
    await sleep(SETTLE_MS);
    const more = memoryWith(service.pid, ONE_BY_ONE, before);
    return [
      ...startMeasures(dialect, 'bubblewrap', '.bwrap', timings),
      ...memoryMeasures(dialect, 'bubblewrap', '.bwrap', fewer, more),
    ];
  } finally {
    await service.stop();
    await database.drop();
  }
}

/**
 * Hosted agents: start to first poll, memory per idle agent and the submit rate beside 50.
 *
 * On the scenario's server (no sandbox): the submit load of the mailbox submit scenario runs
 * once; then 20 agents start one after another, each once the one before has polled and after
 * a random wait within the runner's round (the time from each start's answer to its first
 * poll reaching the server); with the 20 idle, their processes' memory; then 30 more start at
 * once, and with 50 idle the server's growth from 20 to 50 is the runner's share per agent,
 * and the submit load runs again; then every agent stops and it runs a third time. The ratio
 * is the run with the agents over the faster run without. Then, where bubblewrap is
 * installed, a second server runs 20 agents in the sandbox (egress to this Agentry only),
 * started the same way, its share measured from 10 to 20.
 */
export const hostingScenario: Scenario = {
  name: 'hosting',
  prepare: () => Promise.resolve(hostingSettings('off')),
  // The agents are the server's children; their memory is measured apart.
  ownMemoryOnly: true,
  async run({ service, profile, dialect }) {
    const owner = new Owner(service);
    const addresses: string[] = [];
    for (let i = 0; i < FLEET; i++) addresses.push(await owner.create(`idle ${i}`));
    const submit = await submitRuns(service, profile);
    await submit(WARMUP_SUBMITS, false);
    const firstWithout = await submit(MEASURED_SUBMITS, true);

    await sleep(1000);
    const before = residentBytes(service.pid);
    const timings = await startOneByOne(owner, addresses.slice(0, ONE_BY_ONE));
    await sleep(SETTLE_MS);
    const memory = memoryWith(service.pid, ONE_BY_ONE, before);

    const rest = addresses.slice(ONE_BY_ONE);
    for (const address of rest) await owner.start(address);
    await Promise.all(rest.map((address) => owner.firstPoll(address, 500)));
    await sleep(SETTLE_MS);
    const fleetMemory = memoryWith(service.pid, FLEET, before);

    const agentsCpuBefore = agentsCpuSeconds(service.pid);
    const withAgents = await submit(MEASURED_SUBMITS, true);
    const agentsCores = (agentsCpuSeconds(service.pid) - agentsCpuBefore) / withAgents.seconds;
    for (const address of addresses) await owner.stop(address);
    await untilNoAgents(service.pid);
    const secondWithout = await submit(MEASURED_SUBMITS, true);
    const without =
      secondWithout.requestsPerSecond > firstWithout.requestsPerSecond
        ? secondWithout
        : firstWithout;

    const measures: Measure[] = [
      ...startMeasures(dialect, 'no sandbox', '', timings),
      ...memoryMeasures(dialect, 'no sandbox', '', memory, fleetMemory),
      throughputMeasure(
        {
          id: 'hosting.submit_without',
          label: 'hosting: submit, no hosted agents (faster of 2 runs)',
          store: dialect,
        },
        without,
      ),
      throughputMeasure(
        {
          id: 'hosting.submit_with',
          label: `hosting: submit, ${FLEET} idle hosted agents running`,
          store: dialect,
        },
        withAgents,
      ),
      {
        id: 'hosting.submit_ratio',
        label: `hosting: submit throughput, with ÷ without ${FLEET} hosted agents`,
        store: dialect,
        value: withAgents.requestsPerSecond / without.requestsPerSecond,
        unit: '×',
        higherIsBetter: true,
        details: {
          withoutRuns: [firstWithout.requestsPerSecond, secondWithout.requestsPerSecond],
          agentsCoresDuringRun: agentsCores,
          derivedFrom: ['hosting.submit_without', 'hosting.submit_with'],
        },
      },
    ];
    if (bwrapInstalled) measures.push(...(await sandboxed(dialect, profile)));
    else process.stderr.write('bubblewrap is not installed: agents in the sandbox not measured\n');
    return measures;
  },
};
