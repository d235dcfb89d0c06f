import { randomBytes, randomUUID } from 'node:crypto';
import { Agent as HttpAgent } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { CHAT_PROTOCOL_DIGEST } from '../../src/wire/chat.js';
import { startBenchChatAgent, type BenchChatAgent } from '../lib/chat-agent.js';
import { askingSide, CHAT_REPLY_PREFIX, ChatRoundTrips, openFrontDoor } from '../lib/chat-sides.js';
import { exchange, expectJson } from '../lib/exchange.js';
import { compare } from '../lib/interleaved.js';
import type { RunningService } from '../lib/server.js';
import type { Scenario } from './scenario.js';

/**
 * The A2A endpoint of a chat agent (docs/a2a.md, "Outward") beside the chat front door it
 * stands on: the same round trip to the same agent asked both ways on one server, interleaved,
 * so that what A2A adds is their difference in one run.
 */

/** The sealing key of the chat identities: PostgreSQL keeps none beside the database. */
const HOSTING_KEY = randomBytes(32).toString('hex');

/** What an A2A call answers that the scenario reads: the task, once the agent replied. */
interface A2aTask {
  contextId: string;
  status: { state: string; message?: { parts: { text?: string }[] } };
}

/**
 * `SendMessage` (A2A 1.0) spoken by hand, JSON-RPC over plain HTTP with the service's first API
 * key: `text` in one text part, in `contextId` when given. Answers the task; fails unless it is
 * completed with a reply.
 */
async function sendA2a(
  service: RunningService,
  connections: HttpAgent,
  address: string,
  id: number,
  text: string,
  contextId?: string,
): Promise<{ contextId: string; reply: string }> {
  const body = await expectJson(
    exchange(service, connections, {
      method: 'POST',
      path: `/a2a/${address}`,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'SendMessage',
        params: {
          message: {
            messageId: randomUUID(),
            role: 'ROLE_USER',
            parts: [{ text }],
            ...(contextId !== undefined && { contextId }),
          },
        },
      }),
    }),
    200,
    'SendMessage',
  );
  const task = (body.result as { task?: A2aTask } | undefined)?.task;
  const reply = task?.status.message?.parts[0]?.text;
  if (body.id !== id || task?.status.state !== 'TASK_STATE_COMPLETED' || reply === undefined) {
    throw new Error(`SendMessage answered ${JSON.stringify(body).slice(0, 300)}`);
  }
  return { contextId: task.contextId, reply };
}

const CHAT = { warmup: 50, measured: 300, cpu: 300, clients: 1 };
const GOAL_P50_MS = 25;

/**
 * A2A `SendMessage` to a chat agent that answers at once, against the chat front door as the
 * chat round trip scenario measures it (`POST /v2/chat/sessions/{id}/messages`, then the
 * reply's entry on the session's stream), on one server: the scripted agent of
 * bench/lib/chat-agent.ts (it lists the chat protocol, and its owner serves it over A2A,
 * privately), one round trip at a time, the two alternating (which goes first rotating). The
 * A2A client speaks JSON-RPC by hand over kept-alive node:http connections, with the service's
 * API key: a first `SendMessage` (not measured) opens the context and its chat session, and
 * every later one goes on in that context; each answer is read whole, parsed, and its reply's
 * text checked. 50 each to warm up, 300 each measured, with and less the agent's own time;
 * then each side alone (300 round trips, in two runs of the sides in reverse order) gives the
 * server's CPU per round trip. Goal: A2A's p50 within 25 ms of the front door's.
 */
export const a2aScenario: Scenario = {
  name: 'a2a',
  settings: {
    // The chat agent's URL is on loopback.
    AGENTRY_ALLOW_PRIVATE_TARGETS: 'true',
    AGENTRY_HOSTING_KEY: HOSTING_KEY,
  },
  async run({ service, dialect }) {
    const person = new HttpAgent({ keepAlive: true });
    const a2aConnections = new HttpAgent({ keepAlive: true });
    let agent: BenchChatAgent | undefined;
    let closeFrontDoor: (() => void) | undefined;
    try {
      agent = await startBenchChatAgent(service, CHAT_REPLY_PREFIX, {
        listing: {
          name: 'bench echo desk',
          protocols: [CHAT_PROTOCOL_DIGEST],
          profile: { description: 'Says back what it is told.' },
        },
      });
      const address = agent.address;
      await expectJson(
        exchange(service, a2aConnections, {
          method: 'PUT',
          path: `/v2/agents/${address}/a2a`,
          body: JSON.stringify({ access: 'private' }),
        }),
        200,
        'the A2A setting',
      );
      const trips = new ChatRoundTrips(agent, 2, CHAT);
      const frontDoor = await openFrontDoor(service, person, address, trips, 0);
      closeFrontDoor = frontDoor.close;
      let nextId = 1;
      const opened = await sendA2a(service, a2aConnections, address, nextId++, 'hello');
      const chat = await compare(
        service,
        [
          {
            key: 'front_door',
            label: 'a2a: chat, front door (send + reply on the stream)',
            run: frontDoor.run,
          },
          {
            key: 'a2a',
            label: 'a2a: chat, SendMessage',
            run: askingSide(trips, 1, 'a2a', async (text) => {
              const answered = await sendA2a(
                service,
                a2aConnections,
                address,
                nextId++,
                text,
                opened.contextId,
              );
              if (answered.contextId !== opened.contextId) {
                throw new Error(`SendMessage answered in context ${answered.contextId}`);
              }
              return answered.reply;
            }),
          },
        ],
        CHAT,
      );
      return trips.measures('a2a.chat', dialect, chat, {
        side: 1,
        against: 0,
        label: 'a2a: chat, A2A − front door',
        goalMs: GOAL_P50_MS,
        goal: ['p50'],
      });
    } finally {
      closeFrontDoor?.();
      a2aConnections.destroy();
      person.destroy();
      // SendMessage answers once the reply is recorded: the agent's last POST may still be
      // waiting for its own answer.
      await sleep(200);
      await agent?.close();
    }
  },
};
