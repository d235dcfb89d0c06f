import { setTimeout as sleep } from 'node:timers/promises';
import {
  AgentCard,
  Role,
  TaskState,
  type Message,
  type Part,
  type SendMessageResult,
  type Task,
} from '@a2a-js/sdk';
import {
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from '@a2a-js/sdk/client';
import { fetch as undiciFetch, type Dispatcher } from 'undici';
import type { A2aRemoteAgentRow } from '../../store/repositories/a2a.js';
import { unreachable } from './external-card.js';
import { a2aMessage, textPart } from './parts.js';

export interface A2aCallPolicy {
  /** How long the agent may take to answer, polls of an unfinished task included. */
  timeoutMs: number;
  /** How often an unfinished task is asked for again. */
  pollMs: number;
  /** The longest text handed on as an answer (characters). */
  maxTextLength: number;
}

/**
 * How a call went: the answer's text, or why there is none; with the HTTP status the agent
 * last answered (null when it answered none: unreachable, or no answer in time).
 */
export type A2aCallOutcome =
  | { ok: true; text: string; latencyMs: number; statusCode: number | null }
  | {
      ok: false;
      /** Why, for the owner (the trace). */
      error: string;
      /** Why, for the sender, who may be anyone: nothing of where the agent is. */
      told: string;
      latencyMs: number;
      statusCode: number | null;
    };

/** The longest reason kept or told. */
const ERROR_MAX_LENGTH = 1000;

type CalledAgent = Pick<A2aRemoteAgentRow, 'card' | 'rpc_url' | 'protocol_version'>;

/** The states a task rests in: finished, or waiting for the caller (for input, for a login). */
const AT_REST = new Set<TaskState>([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
  TaskState.TASK_STATE_INPUT_REQUIRED,
  TaskState.TASK_STATE_AUTH_REQUIRED,
]);
const ENDED_BADLY: Partial<Record<TaskState, string>> = {
  [TaskState.TASK_STATE_FAILED]: 'failed the task',
  [TaskState.TASK_STATE_CANCELED]: 'canceled the task',
  [TaskState.TASK_STATE_REJECTED]: 'rejected the task',
};

/**
 * Calls external A2A agents with the SDK's JSON-RPC client (A2A 1.0, or 0.3 through its compat
 * layer, as the card said), through the outbound guard: `message/send` with one user text
 * message, then `tasks/get` until a task the agent answered with rests.
 */
export class ExternalA2aCalls {
  constructor(
    private readonly dispatcher: Dispatcher,
    private readonly policy: A2aCallPolicy,
  ) {}

  /** Says `text` to the agent in the conversation `contextId`; never throws. */
  async ask(agent: CalledAgent, contextId: string, text: string): Promise<A2aCallOutcome> {
    const started = performance.now();
    const signal = AbortSignal.timeout(this.policy.timeoutMs);
    let statusCode: number | null = null;
    const seen = () => ({ latencyMs: performance.now() - started, statusCode });
    // Through the guard; the status of each answer is kept for the trace.
    const fetchImpl = (async (input: string | URL, init?: Record<string, unknown>) => {
      const response = await undiciFetch(input, { ...init, dispatcher: this.dispatcher });
      statusCode = response.status;
      return response;
    }) as unknown as typeof fetch;
    const factory = new ClientFactory({
      transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } }),
    });
    try {
      const client = await factory.createFromAgentCard(cardFor(agent));
      let result: SendMessageResult = await client.sendMessage(
        {
          tenant: '',
          message: a2aMessage(Role.ROLE_USER, [textPart(text)], { contextId }),
          configuration: undefined,
          metadata: undefined,
        },
        { signal },
      );
      while (
        !isMessage(result) &&
        !AT_REST.has(result.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED)
      ) {
        await sleep(this.policy.pollMs, undefined, { signal });
        result = await client.getTask({ tenant: '', id: result.id }, { signal });
      }
      const answer = answerOf(result);
      if ('error' in answer) {
        return { ok: false, error: answer.error, told: answer.error, ...seen() };
      }
      return { ok: true, text: this.bounded(answer.text), ...seen() };
    } catch (err) {
      return { ok: false, ...this.failure(err, signal), ...seen() };
    }
  }

  private bounded(text: string): string {
    const max = this.policy.maxTextLength;
    return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
  }

  /** Why the call failed: in full for the owner, and as the sender may be told. */
  private failure(err: unknown, signal: AbortSignal): { error: string; told: string } {
    if (signal.aborted) {
      const late = `did not answer within ${Math.round(this.policy.timeoutMs / 1000)} s`;
      return { error: late, told: late };
    }
    const network =
      err instanceof TypeError || (err instanceof Error && err.cause instanceof Error);
    if (network) {
      const error = unreachable(err);
      // Where the agent's address resolves to is the owner's business.
      return { error, told: error.startsWith('points at') ? 'cannot be reached from here' : error };
    }
    const message = err instanceof Error ? err.message : String(err);
    // The SDK's words for an HTTP error carry the answer's body: the owner's to read.
    const status = /^HTTP error for [^!]*! Status: (\d{3})/.exec(message)?.[1];
    if (status !== undefined) {
      const response = message.slice(message.indexOf('Response:') + 'Response:'.length).trim();
      return {
        error: `answered with HTTP status ${status}: ${response}`.slice(0, ERROR_MAX_LENGTH),
        told: `answered with HTTP status ${status}`,
      };
    }
    const error = `answered with an error: ${message}`.slice(0, ERROR_MAX_LENGTH);
    return { error, told: error };
  }
}

/** The card with the one interface Agentry chose, so that the client calls that one. */
function cardFor(agent: CalledAgent): AgentCard {
  const card = AgentCard.fromJSON(JSON.parse(agent.card));
  const named = card.supportedInterfaces.find((entry) => entry.url === agent.rpc_url);
  return {
    ...card,
    supportedInterfaces: [
      {
        url: agent.rpc_url,
        protocolBinding: 'JSONRPC',
        tenant: named?.tenant ?? '',
        protocolVersion: agent.protocol_version,
      },
    ],
  };
}

function isMessage(result: SendMessageResult): result is Message {
  return 'messageId' in result && 'parts' in result;
}

/** What the parts say, as text: text as is, a file by its URL or name, data as JSON. */
function textOf(parts: Part[] | undefined): string {
  return (parts ?? [])
    .map((part) => {
      const content = part.content;
      switch (content?.$case) {
        case 'text':
          return content.value;
        case 'url':
          return content.value;
        case 'data':
          return JSON.stringify(content.value);
        case 'raw':
          return part.filename ? `[file ${part.filename}]` : '[file]';
        default:
          return '';
      }
    })
    .join('');
}

/** The answer a message or a resting task gives, or why it gives none. */
function answerOf(result: SendMessageResult): { text: string } | { error: string } {
  if (isMessage(result)) return { text: textOf(result.parts) };
  const task: Task = result;
  const state = task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED;
  const said = textOf(task.status?.message?.parts);
  const ended = ENDED_BADLY[state];
  if (ended !== undefined) return { error: `${ended}${said ? `: ${said}` : ''}` };
  const artifacts = (task.artifacts ?? [])
    .map((artifact) => textOf(artifact.parts))
    .filter((text) => text !== '')
    .join('\n');
  // A task waiting for input says what it needs in its status message.
  const text = state === TaskState.TASK_STATE_COMPLETED ? artifacts || said : said || artifacts;
  return { text: text || '(the agent finished without a text answer)' };
}
