import { randomBytes } from 'node:crypto';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { registerAgent } from '../../test/kit/agents.js';
import { TestIdentity } from '../../test/kit/uagent.js';
import { startBenchChatAgent, type BenchChatAgent } from '../lib/chat-agent.js';
import type { OpenEventStream } from '../lib/event-stream.js';
import { processCpuSeconds } from '../lib/proc.js';
import type { Measure } from '../lib/report.js';
import type { RunningService } from '../lib/server.js';
import { summarize, type LatencySummary } from '../lib/stats.js';
import { followSession, openSession, sendMessage } from './chat.js';
import type { Scenario } from './scenario.js';
import { seed, wordOf } from './search.js';

/**
 * The MCP endpoint (docs/mcp.md) beside the HTTP API it stands on: the same reads and the same
 * chat, asked both ways on one server, interleaved, so that what the endpoint adds is their
 * difference in one run.
 */

/** The sealing key of the chat identities: PostgreSQL keeps none beside the database. */
const HOSTING_KEY = randomBytes(32).toString('hex');

// ---- Plain HTTP, both ways -------------------------------------------------------------------

interface Exchange {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One request over a kept-alive connection of `connections`; the whole answer read. */
function exchange(
  service: RunningService,
  connections: HttpAgent,
  { method, path, headers, body }: Exchange,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${service.url}${path}`,
      {
        method,
        headers: {
          authorization: `Bearer ${service.apiKey}`,
          ...(body !== undefined && { 'content-type': 'application/json' }),
          ...headers,
        },
        agent: connections,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The answer's JSON when its status is `status`; fails the scenario otherwise. */
async function expectJson(
  answer: Promise<Answer>,
  status: number,
  what: string,
): Promise<Record<string, unknown>> {
  const { status: got, text } = await answer;
  if (got !== status) throw new Error(`${what} answered ${got}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/**
 * An MCP session spoken by hand (JSON-RPC over plain HTTP, as the transport of the
 * specification has it): `initialize`, then the `initialized` notification; every later
 * request carries the session's id and the protocol version the server chose, and asks for a
 * JSON answer (no progress token).
 */
class McpSession {
  private nextId = 1;

  private constructor(
    private readonly service: RunningService,
    private readonly connections: HttpAgent,
    private readonly sessionId: string,
    private readonly protocolVersion: string,
  ) {}

  static async open(service: RunningService, connections: HttpAgent): Promise<McpSession> {
    const answer = await exchange(service, connections, {
      method: 'POST',
      path: '/mcp',
      headers: { accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: 'agentry-bench', version: '1' },
        },
      }),
    });
    const sessionId = answer.headers['mcp-session-id'];
    if (answer.status !== 200 || typeof sessionId !== 'string') {
      throw new Error(`initialize answered ${answer.status}: ${answer.text.slice(0, 300)}`);
    }
    const { result } = JSON.parse(answer.text) as { result: { protocolVersion: string } };
    const session = new McpSession(service, connections, sessionId, result.protocolVersion);
    const initialized = await exchange(service, connections, {
      method: 'POST',
      path: '/mcp',
      headers: session.headers(),
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    });
    if (initialized.status !== 202) {
      throw new Error(`notifications/initialized answered ${initialized.status}`);
    }
    return session;
  }

  private headers(): Record<string, string> {
    return {
      accept: 'application/json, text/event-stream',
      'mcp-session-id': this.sessionId,
      'mcp-protocol-version': this.protocolVersion,
    };
  }

  /** `tools/call`: the tool's structured content; fails on any error, the tool's included. */
  async callTool(name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    const body = await expectJson(
      exchange(this.service, this.connections, {
        method: 'POST',
        path: '/mcp',
        headers: this.headers(),
        body: JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: { name, arguments: args },
        }),
      }),
      200,
      `tools/call ${name}`,
    );
    const result = body.result as
      | { isError?: boolean; structuredContent?: Record<string, unknown>; content: unknown }
      | undefined;
    if (body.id !== id || result === undefined || result.isError || !result.structuredContent) {
      throw new Error(`tools/call ${name} failed: ${JSON.stringify(body).slice(0, 300)}`);
    }
    return result.structuredContent;
  }
}

// ---- Interleaved closed loops ------------------------------------------------------------------

/** One way of asking, given the index of the request (the same index asks the same thing). */
type Side = (index: number) => Promise<void>;

/**
 * A closed loop of `clients` clients, each asking every side in turn (which side goes first
 * rotating), `perSide` rounds in all, request indices from `first`: every side meets the same
 * server at the same moments. Answers each side's latencies (ms).
 */
async function interleaved(
  sides: Side[],
  perSide: number,
  clients: number,
  first = 0,
): Promise<number[][]> {
  const samples = sides.map(() => [] as number[]);
  let next = 0;
  const client = async (c: number): Promise<void> => {
    for (let round = next++; round < perSide; round = next++) {
      for (let k = 0; k < sides.length; k++) {
        const s = (round + c + k) % sides.length;
        const started = performance.now();
        await sides[s]!(first + round);
        samples[s]!.push(performance.now() - started);
      }
    }
  };
  await Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
  return samples;
}

/**
 * The server's CPU per request of each side (ms): each side alone in a closed loop of
 * `clients`, `count` requests in two runs, the sides' order reversed for the second, so that
 * a drift in the machine's pace weighs on all alike.
 */
async function cpuPerRequest(
  pid: number,
  sides: Side[],
  count: number,
  clients: number,
  first: number,
): Promise<number[]> {
  const seconds = sides.map(() => 0);
  const half = Math.ceil(count / 2);
  const order = sides.map((_, s) => s);
  for (const pass of [order, [...order].reverse()]) {
    for (const s of pass) {
      const before = processCpuSeconds(pid);
      await interleaved([sides[s]!], half, clients, first);
      seconds[s]! += processCpuSeconds(pid) - before;
    }
  }
  return seconds.map((cpu) => (cpu * 1000) / (2 * half));
}

// ---- Measures ----------------------------------------------------------------------------------

const parts = (summary: LatencySummary) => ({ p50: summary.p50, p99: summary.p99 });

interface Compared {
  /** Id and label of each side, the HTTP API's first. */
  sides: { key: string; label: string }[];
  samples: number[][];
  cpuMs?: number[];
  serverCores: number;
  clients: number;
  loadAverage: number;
}

/**
 * A measure for each side (its p99, with its p50), and two for the difference MCP − HTTP API:
 * of their p50s and of their p99s. `mcp` and `against` are the indices of the sides compared;
 * `goal` names the differences a goal is set for.
 */
function comparedMeasures(
  id: string,
  dialect: Measure['store'],
  run: Compared,
  difference: {
    mcp: number;
    against: number;
    label: string;
    goalMs: number;
    goal: ('p50' | 'p99')[];
    /** The difference measures' ids are `${id}.${key}_p50` and `…_p99`. */
    key?: string;
  },
): Measure[] {
  const summaries = run.samples.map((samples) => summarize(samples));
  const sideMeasures = run.sides.map((side, s): Measure => ({
    id: `${id}.${side.key}`,
    label: side.label,
    store: dialect,
    value: summaries[s]!.p99,
    unit: 'ms p99',
    latencyMs: parts(summaries[s]!),
    serverCores: run.serverCores,
    details: {
      requests: summaries[s]!.count,
      max: summaries[s]!.max,
      mean: summaries[s]!.mean,
      clients: run.clients,
      ...(run.cpuMs && { serverCpuMsPerRequest: run.cpuMs[s] }),
      loadAverage: run.loadAverage,
    },
  }));
  const mcp = summaries[difference.mcp]!;
  const against = summaries[difference.against]!;
  const derivedFrom = [
    `${id}.${run.sides[difference.mcp]!.key}`,
    `${id}.${run.sides[difference.against]!.key}`,
  ];
  const differences = (['p50', 'p99'] as const).map((p): Measure => ({
    id: `${id}.${difference.key ?? 'difference'}_${p}`,
    label: `${difference.label}, ${p}${difference.goal.includes(p) ? ` (goal < ${difference.goalMs} ms)` : ''}`,
    store: dialect,
    value: mcp[p] - against[p],
    unit: `ms ${p}`,
    details: {
      ...(difference.goal.includes(p) && { goalMs: difference.goalMs }),
      ...(run.cpuMs && {
        serverCpuMsPerRequestDifference:
          run.cpuMs[difference.mcp]! - run.cpuMs[difference.against]!,
      }),
      derivedFrom,
    },
  }));
  return [...sideMeasures, ...differences];
}

/** Measures `sides` interleaved after a warm-up, then the server's CPU per request of each. */
async function compare(
  service: RunningService,
  sides: { key: string; label: string; run: Side }[],
  counts: { warmup: number; measured: number; cpu: number; clients: number },
): Promise<Compared> {
  const runs = sides.map((side) => side.run);
  await interleaved(runs, counts.warmup, counts.clients);
  const cpuBefore = processCpuSeconds(service.pid);
  const started = performance.now();
  const samples = await interleaved(runs, counts.measured, counts.clients, counts.warmup);
  const seconds = (performance.now() - started) / 1000;
  const serverCores = (processCpuSeconds(service.pid) - cpuBefore) / seconds;
  const loadAverage = loadavg()[0]!;
  const cpuMs = await cpuPerRequest(
    service.pid,
    runs,
    counts.cpu,
    counts.clients,
    counts.warmup + counts.measured,
  );
  return { sides, samples, cpuMs, serverCores, clients: counts.clients, loadAverage };
}

// ---- The scenario ------------------------------------------------------------------------------

/** Listings the search runs over, ten to a distinctive word (as the search scenario writes them). */
const LISTINGS = 1_000;
const PER_WORD = 10;
/** Agents of the user that `get_agent` and `GET /v2/agents/{address}` read, in turn. */
const OWN_AGENTS = 16;
const CLIENTS = 2;
const READS = { warmup: 500, measured: 2_000, cpu: 1_000, clients: CLIENTS };
const CHAT_WARMUP = 50;
const CHAT_ROUND_TRIPS = 300;
const REPLY_PREFIX = 'echo: ';
/** A reply that has not come by then fails the scenario. */
const REPLY_TIMEOUT_MS = 10_000;
const GOAL_READ_P99_MS = 2;
const GOAL_CHAT_MS = 5;

/**
 * The MCP endpoint against the HTTP API, on one server, each pair interleaved (every client
 * asks both ways in turn, which goes first rotating) so that both meet the same load at the
 * same moments. The MCP client speaks JSON-RPC by hand over kept-alive node:http connections,
 * as the HTTP API's client does: `initialize` (the session's id and protocol version then go
 * with every request), `notifications/initialized`, then `tools/call`s answered as JSON (no
 * progress token); each answer is read whole and parsed, both ways.
 *
 * - **search**: `tools/call search_agents {query}` against `POST /v1/search/agents
 *   {search_text, limit: 10}` (the tool's limit), the same word both ways, over 1,000
 *   listings written as the search scenario writes them (a word that ten carry). 2 clients,
 *   500 rounds to warm up, 2,000 measured.
 * - **get agent**: `tools/call get_agent {address}` against `GET /v2/agents/{address}`, over
 *   16 agents of the user registered through the API with a listing and no protocols. The tool
 *   reads more than the route: the listing as search shows it (the route `GET
 *   /v1/search/agents/{address}`) beside the agent's record and status (the route's), and the
 *   manifests of its protocols (none here); so a third side asks the two routes at once on
 *   two connections, what a client of the HTTP API does to read as much. Counts as search.
 * - **chat**: `tools/call chat_with_agent {session_id, text}` (which sends and waits for the
 *   reply) against the chat front door as the chat round trip scenario measures it
 *   (`POST /v2/chat/sessions/{id}/messages`, then the reply's entry on the session's stream),
 *   to the scripted agent of bench/lib/chat-agent.ts (answers at once), one round trip at a
 *   time, alternating: 50 each to warm up, 300 each measured. Both with and less the agent's
 *   own time.
 *
 * After each read pair, each side alone (1,000 requests, in two runs of the sides in reverse
 * order) gives the server's CPU per request. Goals: MCP's p99 within 2 ms of the HTTP API's for
 * the reads, and chat's p50 and p99 within 5 ms.
 */
export const mcpScenario: Scenario = {
  name: 'mcp',
  settings: {
    // The chat agent's URL is on loopback.
    AGENTRY_ALLOW_PRIVATE_TARGETS: 'true',
    AGENTRY_HOSTING_KEY: HOSTING_KEY,
    // The seeded listings are the user's agents too.
    AGENTRY_QUOTA_AGENTS: '10000',
  },
  async run({ service, dialect, store }) {
    const db = store();
    const user = await db.db.selectFrom('users').select('id').executeTakeFirstOrThrow();
    await seed(db, user.id, 0, LISTINGS);
    const own = Array.from({ length: OWN_AGENTS }, (_, i) =>
      TestIdentity.fromSeed(`bench mcp agent ${i}`),
    );
    for (const [i, identity] of own.entries()) {
      await registerAgent(service, service.apiKey, identity, {
        listing: {
          name: `mcp bench agent ${i}`,
          profile: {
            description: `Answers questions about tides, number ${i}`,
            readme: `# Tides ${i}\n\nForecasts for any harbour.`,
          },
        },
      });
    }

    const httpConnections = new HttpAgent({ keepAlive: true, maxSockets: 2 * CLIENTS });
    const mcpConnections = new HttpAgent({ keepAlive: true, maxSockets: 2 * CLIENTS });
    const person = new HttpAgent({ keepAlive: true });
    const streams: OpenEventStream[] = [];
    let agent: BenchChatAgent | undefined;
    try {
      const mcp = await McpSession.open(service, mcpConnections);
      const words = LISTINGS / PER_WORD;
      const wordAt = (index: number) => wordOf((index * 7919) % words);
      const addressAt = (index: number) => own[index % OWN_AGENTS]!.address;
      const httpJson = (request: Exchange, what: string) =>
        expectJson(exchange(service, httpConnections, request), 200, what);
      const found = (agents: unknown, what: string) => {
        if (!Array.isArray(agents) || agents.length !== PER_WORD) {
          throw new Error(`${what} found ${JSON.stringify(agents).slice(0, 200)}`);
        }
      };

      const search = await compare(
        service,
        [
          {
            key: 'http',
            label: 'mcp: search, HTTP API (POST /v1/search/agents)',
            run: async (i) => {
              const body = await httpJson(
                {
                  method: 'POST',
                  path: '/v1/search/agents',
                  body: JSON.stringify({ search_text: wordAt(i), limit: 10 }),
                },
                'a search',
              );
              found(body.agents, 'a search');
            },
          },
          {
            key: 'mcp',
            label: 'mcp: search, tools/call search_agents',
            run: async (i) => {
              const result = await mcp.callTool('search_agents', { query: wordAt(i) });
              found(result.agents, 'search_agents');
            },
          },
        ],
        READS,
      );

      const getAgent = await compare(
        service,
        [
          {
            key: 'http',
            label: 'mcp: get agent, HTTP API (GET /v2/agents/{address})',
            run: async (i) => {
              const body = await httpJson(
                { method: 'GET', path: `/v2/agents/${addressAt(i)}` },
                'an agent',
              );
              if (body.address !== addressAt(i)) throw new Error('another agent was answered');
            },
          },
          {
            key: 'http_listing',
            label:
              'mcp: get agent, HTTP API, record and listing at once (GET /v2/agents/{address} + GET /v1/search/agents/{address})',
            run: async (i) => {
              await Promise.all([
                httpJson({ method: 'GET', path: `/v2/agents/${addressAt(i)}` }, 'an agent'),
                httpJson(
                  { method: 'GET', path: `/v1/search/agents/${addressAt(i)}` },
                  "an agent's listing",
                ),
              ]);
            },
          },
          {
            key: 'mcp',
            label: 'mcp: get agent, tools/call get_agent (record, status and listing)',
            run: async (i) => {
              const result = await mcp.callTool('get_agent', { address: addressAt(i) });
              const record = result.record as { address: string } | null;
              if (record?.address !== addressAt(i) || result.listing === null) {
                throw new Error(`get_agent answered ${JSON.stringify(result).slice(0, 200)}`);
              }
            },
          },
        ],
        READS,
      );

      // ---- Chat ----
      agent = await startBenchChatAgent(service, REPLY_PREFIX);
      const chatAgent = agent;
      const waiting = new Map<string, (at: number) => void>();
      const frontDoorSession = await openSession(service, chatAgent.address);
      streams.push(
        await followSession(service, frontDoorSession, (event, data) => {
          if (event !== 'message' || !data.includes('"direction":"in"')) return;
          const entry = JSON.parse(data) as { text: string | null };
          const arrived = entry.text === null ? undefined : waiting.get(entry.text);
          if (!arrived) return;
          waiting.delete(entry.text!);
          arrived(performance.now());
        }),
      );
      const opened = await mcp.callTool('chat_with_agent', {
        agent: chatAgent.address,
        text: 'hello',
        timeout_seconds: 10,
      });
      const mcpSession = opened.session_id as string;

      const agentOwn: number[][] = [[], []];
      /** The agent's own time for the reply `replyText`, noted for `side`. */
      const agentTime = (replyText: string, side: number): number => {
        const timing = chatAgent.take(replyText);
        if (!timing) throw new Error(`the agent did not note its reply "${replyText}"`);
        const ms = timing.replyStartedAt - timing.receivedAt;
        agentOwn[side]!.push(ms);
        return ms;
      };
      const lessAgent: number[][] = [[], []];
      let measuring = false;
      const frontDoor: Side = async (i) => {
        const text = `front door ${i}`;
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
          await sendMessage(service, person, frontDoorSession, text);
          const arrived = await reply;
          const ms = agentTime(replyText, 0);
          if (measuring) lessAgent[0]!.push(arrived - sent - ms);
        } finally {
          clearTimeout(timer);
          waiting.delete(replyText);
        }
      };
      const throughMcp: Side = async (i) => {
        const text = `mcp ${i}`;
        const replyText = `${REPLY_PREFIX}${text}`;
        const sent = performance.now();
        const result = await mcp.callTool('chat_with_agent', {
          session_id: mcpSession,
          text,
          timeout_seconds: REPLY_TIMEOUT_MS / 1000,
        });
        const answered = performance.now();
        if (result.reply !== replyText) {
          throw new Error(`chat_with_agent answered ${JSON.stringify(result).slice(0, 300)}`);
        }
        const ms = agentTime(replyText, 1);
        if (measuring) lessAgent[1]!.push(answered - sent - ms);
      };
      const chatSides = [frontDoor, throughMcp];
      await interleaved(chatSides, CHAT_WARMUP, 1);
      agentOwn[0]!.length = 0;
      agentOwn[1]!.length = 0;
      measuring = true;
      const chatCpuBefore = processCpuSeconds(service.pid);
      const chatStarted = performance.now();
      const chatSamples = await interleaved(chatSides, CHAT_ROUND_TRIPS, 1, CHAT_WARMUP);
      const chatSeconds = (performance.now() - chatStarted) / 1000;
      const chatCores = (processCpuSeconds(service.pid) - chatCpuBefore) / chatSeconds;
      const chatLoad = loadavg()[0]!;

      const chatRun = (less: boolean): Compared => {
        const suffix = less ? ", less the agent's time" : '';
        return {
          sides: [
            {
              key: less ? 'front_door_less_agent' : 'front_door',
              label: `mcp: chat, front door (send + reply on the stream)${suffix}`,
            },
            {
              key: less ? 'mcp_less_agent' : 'mcp',
              label: `mcp: chat, tools/call chat_with_agent${suffix}`,
            },
          ],
          samples: less ? lessAgent : chatSamples,
          serverCores: chatCores,
          clients: 1,
          loadAverage: chatLoad,
        };
      };
      const chatMeasures = (less: boolean): Measure[] => {
        const measures = comparedMeasures(
          `mcp.chat${less ? '.less_agent' : ''}`,
          dialect,
          chatRun(less),
          {
            mcp: 1,
            against: 0,
            label: `mcp: chat, MCP − front door${less ? ", less the agent's time" : ''}`,
            goalMs: GOAL_CHAT_MS,
            goal: ['p50', 'p99'],
          },
        );
        // The agent's own time, which the round trips with it hold.
        measures[0]!.details!.agentOwnMs = parts(summarize(agentOwn[0]!));
        measures[1]!.details!.agentOwnMs = parts(summarize(agentOwn[1]!));
        return measures;
      };

      return [
        ...comparedMeasures('mcp.search', dialect, search, {
          mcp: 1,
          against: 0,
          label: 'mcp: search, MCP − HTTP API',
          goalMs: GOAL_READ_P99_MS,
          goal: ['p99'],
        }),
        ...comparedMeasures('mcp.get_agent', dialect, getAgent, {
          mcp: 2,
          against: 0,
          label: 'mcp: get agent, MCP − GET /v2/agents/{address}',
          goalMs: GOAL_READ_P99_MS,
          goal: ['p99'],
        }),
        // Against the two routes that read as much: the differences alone.
        ...comparedMeasures('mcp.get_agent', dialect, getAgent, {
          mcp: 2,
          against: 1,
          label: 'mcp: get agent, MCP − record and listing at once',
          goalMs: GOAL_READ_P99_MS,
          goal: [],
          key: 'difference_same_reads',
        }).slice(getAgent.sides.length),
        ...chatMeasures(false),
        ...chatMeasures(true),
      ];
    } finally {
      for (const stream of streams) stream.request.destroy();
      httpConnections.destroy();
      mcpConnections.destroy();
      person.destroy();
      // chat_with_agent answers once the reply is recorded: the agent's last POST may still be
      // waiting for its own answer.
      await sleep(200);
      await agent?.close();
    }
  },
};
