import { randomBytes } from 'node:crypto';
import { Agent as HttpAgent } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { registerAgent } from '../../test/kit/agents.js';
import { TestIdentity } from '../../test/kit/uagent.js';
import { startBenchChatAgent, type BenchChatAgent } from '../lib/chat-agent.js';
import {
  askingSide,
  CHAT_REPLY_PREFIX,
  CHAT_REPLY_TIMEOUT_MS,
  ChatRoundTrips,
  openFrontDoor,
} from '../lib/chat-sides.js';
import { exchange, expectJson, type Exchange } from '../lib/exchange.js';
import { compare, comparedMeasures } from '../lib/interleaved.js';
import type { RunningService } from '../lib/server.js';
import type { Scenario } from './scenario.js';
import { seed, wordOf } from './search.js';

/**
 * The MCP endpoint (docs/mcp.md) beside the HTTP API it stands on: the same reads and the same
 * chat, asked both ways on one server, interleaved, so that what the endpoint adds is their
 * difference in one run.
 */

/** The sealing key of the chat identities: PostgreSQL keeps none beside the database. */
const HOSTING_KEY = randomBytes(32).toString('hex');

// ---- MCP by hand ---------------------------------------------------------------------------

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

// ---- The scenario ------------------------------------------------------------------------------

/** Listings the search runs over, ten to a distinctive word (as the search scenario writes them). */
const LISTINGS = 1_000;
const PER_WORD = 10;
/** Agents of the user that `get_agent` and `GET /v2/agents/{address}` read, in turn. */
const OWN_AGENTS = 16;
const CLIENTS = 2;
const READS = { warmup: 500, measured: 2_000, cpu: 1_000, clients: CLIENTS };
const CHAT = { warmup: 50, measured: 300, clients: 1 };
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
    let agent: BenchChatAgent | undefined;
    let closeFrontDoor: (() => void) | undefined;
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
      agent = await startBenchChatAgent(service, CHAT_REPLY_PREFIX);
      const trips = new ChatRoundTrips(agent, 2, CHAT);
      const frontDoor = await openFrontDoor(service, person, agent.address, trips, 0);
      closeFrontDoor = frontDoor.close;
      const opened = await mcp.callTool('chat_with_agent', {
        agent: agent.address,
        text: 'hello',
        timeout_seconds: 10,
      });
      const mcpSession = opened.session_id as string;
      const chat = await compare(
        service,
        [
          {
            key: 'front_door',
            label: 'mcp: chat, front door (send + reply on the stream)',
            run: frontDoor.run,
          },
          {
            key: 'mcp',
            label: 'mcp: chat, tools/call chat_with_agent',
            run: askingSide(trips, 1, 'mcp', async (text) => {
              const result = await mcp.callTool('chat_with_agent', {
                session_id: mcpSession,
                text,
                timeout_seconds: CHAT_REPLY_TIMEOUT_MS / 1000,
              });
              return result.reply;
            }),
          },
        ],
        CHAT,
      );

      return [
        ...comparedMeasures('mcp.search', dialect, search, {
          side: 1,
          against: 0,
          label: 'mcp: search, MCP − HTTP API',
          goalMs: GOAL_READ_P99_MS,
          goal: ['p99'],
        }),
        ...comparedMeasures('mcp.get_agent', dialect, getAgent, {
          side: 2,
          against: 0,
          label: 'mcp: get agent, MCP − GET /v2/agents/{address}',
          goalMs: GOAL_READ_P99_MS,
          goal: ['p99'],
        }),
        // Against the two routes that read as much: the differences alone.
        ...comparedMeasures('mcp.get_agent', dialect, getAgent, {
          side: 2,
          against: 1,
          label: 'mcp: get agent, MCP − record and listing at once',
          goalMs: GOAL_READ_P99_MS,
          goal: [],
          key: 'difference_same_reads',
        }).slice(getAgent.sides.length),
        ...trips.measures('mcp.chat', dialect, chat, {
          side: 1,
          against: 0,
          label: 'mcp: chat, MCP − front door',
          goalMs: GOAL_CHAT_MS,
          goal: ['p50', 'p99'],
        }),
      ];
    } finally {
      closeFrontDoor?.();
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
