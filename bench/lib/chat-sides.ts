import type { Agent as HttpAgent } from 'node:http';
import { followSession, openSession, sendMessage } from '../scenarios/chat.js';
import type { BenchChatAgent } from './chat-agent.js';
import {
  comparedMeasures,
  latencyParts,
  type Compared,
  type Difference,
  type Side,
} from './interleaved.js';
import type { Measure } from './report.js';
import type { RunningService } from './server.js';
import { summarize } from './stats.js';

/**
 * Chat round trips to the scripted agent of bench/lib/chat-agent.ts asked several ways (the
 * chat front door, and a way that stands on it), interleaved, with the agent's own time of each
 * kept apart.
 */

/** What the scripted agent puts before the text it says back. */
export const CHAT_REPLY_PREFIX = 'echo: ';
/** A reply that has not come by then fails the scenario. */
export const CHAT_REPLY_TIMEOUT_MS = 10_000;

/**
 * The agent's own time in the round trips of each side (from receiving the message to beginning
 * its reply's POST), and each round trip less it, for the measured requests alone: those of
 * indices from `counts.warmup` on, `counts.measured` of them (as {@link compare} numbers them).
 */
export class ChatRoundTrips {
  private readonly agentOwn: number[][];
  private readonly lessAgent: number[][];

  constructor(
    private readonly agent: BenchChatAgent,
    sides: number,
    private readonly counts: { warmup: number; measured: number },
  ) {
    this.agentOwn = Array.from({ length: sides }, () => []);
    this.lessAgent = Array.from({ length: sides }, () => []);
  }

  /**
   * Notes round trip `index` of `side`, whose reply was `replyText` and which took `ms`, sent to
   * answered; fails if the agent did not note that reply.
   */
  note(side: number, index: number, replyText: string, ms: number): void {
    const timing = this.agent.take(replyText);
    if (!timing) throw new Error(`the agent did not note its reply "${replyText}"`);
    if (index < this.counts.warmup || index >= this.counts.warmup + this.counts.measured) return;
    const own = timing.replyStartedAt - timing.receivedAt;
    this.agentOwn[side]!.push(own);
    this.lessAgent[side]!.push(ms - own);
  }

  /**
   * The measures of `run` (as {@link comparedMeasures} makes them), then the same less the
   * agent's time (ids under `${id}.less_agent`, side keys ending `_less_agent`); each side's
   * details have the agent's own time.
   */
  measures(
    id: string,
    dialect: Measure['store'],
    run: Compared,
    difference: Difference,
  ): Measure[] {
    const suffix = ", less the agent's time";
    const less: Compared = {
      ...run,
      sides: run.sides.map(({ key, label }) => ({
        key: `${key}_less_agent`,
        label: `${label}${suffix}`,
      })),
      samples: this.lessAgent,
    };
    const withAgentOwn = (measures: Measure[]): Measure[] => {
      // The agent's own time, which the round trips with it hold.
      for (const [s, own] of this.agentOwn.entries()) {
        measures[s]!.details!.agentOwnMs = latencyParts(summarize(own));
      }
      return measures;
    };
    return [
      ...withAgentOwn(comparedMeasures(id, dialect, run, difference)),
      ...withAgentOwn(
        comparedMeasures(`${id}.less_agent`, dialect, less, {
          ...difference,
          label: `${difference.label}${suffix}`,
        }),
      ),
    ];
  }
}

/**
 * The chat front door as the chat round trip scenario measures it, as side `side` of `trips`:
 * a session of the service's first user with the agent, followed on its stream; each round trip
 * sends `front door ${index}` (`POST /v2/chat/sessions/{id}/messages` over a kept-alive
 * connection of `person`) and ends when the reply's entry (direction `in`, the expected text)
 * arrives on the stream. `close` stops following the session.
 */
export async function openFrontDoor(
  service: RunningService,
  person: HttpAgent,
  agentAddress: string,
  trips: ChatRoundTrips,
  side: number,
): Promise<{ run: Side; close(): void }> {
  const waiting = new Map<string, (at: number) => void>();
  const session = await openSession(service, agentAddress);
  const stream = await followSession(service, session, (event, data) => {
    if (event !== 'message' || !data.includes('"direction":"in"')) return;
    const entry = JSON.parse(data) as { text: string | null };
    const arrived = entry.text === null ? undefined : waiting.get(entry.text);
    if (!arrived) return;
    waiting.delete(entry.text!);
    arrived(performance.now());
  });
  const run: Side = async (i) => {
    const text = `front door ${i}`;
    const replyText = `${CHAT_REPLY_PREFIX}${text}`;
    let timer: NodeJS.Timeout | undefined;
    const reply = new Promise<number>((resolve, reject) => {
      waiting.set(replyText, resolve);
      timer = setTimeout(
        () => reject(new Error(`no reply to "${text}" within ${CHAT_REPLY_TIMEOUT_MS} ms`)),
        CHAT_REPLY_TIMEOUT_MS,
      );
    });
    const sent = performance.now();
    try {
      await sendMessage(service, person, session, text);
      const arrived = await reply;
      trips.note(side, i, replyText, arrived - sent);
    } finally {
      clearTimeout(timer);
      waiting.delete(replyText);
    }
  };
  return { run, close: () => stream.request.destroy() };
}

/**
 * Side `side` of `trips` that asks `ask(text)`, with text `${name} ${index}`, and takes its
 * answer for the reply: a round trip is from the ask to its answer, which must be the agent's.
 */
export function askingSide(
  trips: ChatRoundTrips,
  side: number,
  name: string,
  ask: (text: string) => Promise<unknown>,
): Side {
  return async (i) => {
    const text = `${name} ${i}`;
    const replyText = `${CHAT_REPLY_PREFIX}${text}`;
    const sent = performance.now();
    const reply = await ask(text);
    const ms = performance.now() - sent;
    if (reply !== replyText) {
      throw new Error(`${name} answered ${JSON.stringify(reply).slice(0, 300)} to "${text}"`);
    }
    trips.note(side, i, replyText, ms);
  };
}
