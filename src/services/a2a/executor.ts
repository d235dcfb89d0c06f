import { randomUUID } from 'node:crypto';
import { Role, TaskState, type Message, type Part, type Task, type TaskStatus } from '@a2a-js/sdk';
import {
  AgentEvent,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
  type ServerCallContext,
  type User,
} from '@a2a-js/sdk/server';
import type { UserPrincipal } from '../../auth/principal.js';
import { DomainError } from '../../errors.js';
import type { Clock } from '../../infra/clock.js';
import type { Store } from '../../store/index.js';
import { chatEntryView } from '../../views/chat.js';
import type { ChatService } from '../chat.js';
import { ReplyReader, type ReplyPiece } from '../chat-reply.js';
import { a2aMessage, filePart, textOfParts, textPart } from './parts.js';

/** The artifact a task's reply is carried in (a streamed reply: chunk after chunk). */
const REPLY_ARTIFACT = 'reply';
/** How long a process remembers that it ended a task itself. */
const ENDED_HERE_MS = 60_000;
/** The states a task does not leave. */
const FINAL = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);

/**
 * Who calls an agent over A2A: a user (or team, with `x-team`) by their API key, who speaks from
 * their own chat identity; or anyone, without a key, to a public agent, who speaks from the chat
 * identity of the agent's owner. Tasks are kept apart by `userName`.
 */
export class A2aCaller implements User {
  constructor(
    /** Whom the chat messages are sent as (and whose quota they count in). */
    readonly speaksAs: UserPrincipal,
    /** Who is calling: the key's owner, or `anonymous`. */
    readonly userName: string,
  ) {}

  get isAuthenticated(): boolean {
    return this.userName !== ANONYMOUS;
  }
}

/** How tasks of callers without a key are kept (one scope for them all, per agent). */
export const ANONYMOUS = 'anonymous';

export interface ChatExecutorPolicy {
  /** How long a call waits for the agent's reply before answering with the task still working. */
  replyTimeoutMs: number;
}

/**
 * Carries A2A messages to uAgents agents as chat messages (docs/a2a.md, "Outward"): a task is
 * one message and its reply. The task is submitted, then working once the agent acknowledges
 * the message, its reply streams as the chunks of one artifact, and it completes with the reply
 * as its status message, or fails with the reason the message was not delivered. A reply that
 * takes longer than the wait leaves the task working: `tasks/get` reads the conversation then.
 * An A2A context is one chat session of the caller with the agent; the chat message's id is the
 * task's id, which is how a task finds its reply later.
 */
export class ChatExecutor implements AgentExecutor {
  /** The waits of this process, by task id: cancelling one stops it. */
  private readonly running = new Map<string, { abort: AbortController; contextId: string }>();
  /**
   * Tasks this process ended lately: the SDK stores their last states after the wait is over,
   * reading each back, and there is nothing in the chat session to bring them up to date with.
   */
  private readonly endedHere = new Set<string>();

  constructor(
    private readonly store: Store,
    private readonly chat: ChatService,
    private readonly clock: Clock,
    private readonly policy: ChatExecutorPolicy,
  ) {}

  /** The executions under way in this process: closing waits for them. */
  private readonly executions = new Set<Promise<void>>();

  execute = (request: RequestContext, bus: ExecutionEventBus): Promise<void> => {
    const execution = this.run(request, bus);
    this.executions.add(execution);
    void execution.finally(() => this.executions.delete(execution)).catch(() => {});
    return execution;
  };

  /**
   * Stops every wait of this process (the server is closing): the tasks stay as they are, and
   * any replica brings them up to date from their chat sessions when they are read.
   */
  async close(): Promise<void> {
    for (const wait of this.running.values()) wait.abort.abort();
    await Promise.allSettled([...this.executions]);
  }

  private async run(request: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const { taskId, contextId } = request;
    const agent = request.context.tenant!;
    const caller = callerOf(request.context);
    // A message into a task still open goes on in it; any other starts one.
    const started: Task = request.task
      ? {
          ...request.task,
          status: {
            state: TaskState.TASK_STATE_SUBMITTED,
            message: undefined,
            timestamp: this.now(),
          },
          history: [...request.task.history, request.userMessage],
        }
      : {
          id: taskId,
          contextId,
          status: {
            state: TaskState.TASK_STATE_SUBMITTED,
            message: undefined,
            timestamp: this.now(),
          },
          artifacts: [],
          history: [request.userMessage],
          metadata: {},
        };
    bus.publish(AgentEvent.task(started));
    const abort = new AbortController();
    this.running.set(taskId, { abort, contextId });
    try {
      const session = await this.sessionFor(agent, caller, contextId);
      let replied = false;
      const asked = await this.chat.ask(caller.speaksAs, { session }, textOf(request.userMessage), {
        timeoutMs: this.policy.replyTimeoutMs,
        // A task's first message is known by the task's id: a later reply completes it.
        msgId: request.task ? randomUUID() : taskId,
        signal: abort.signal,
        acknowledged: () =>
          bus.publish(this.status(taskId, contextId, TaskState.TASK_STATE_WORKING)),
        pieces: (pieces) => {
          for (const update of artifactUpdates(pieces, replied)) {
            replied = true;
            bus.publish(
              AgentEvent.artifactUpdate({ taskId, contextId, metadata: undefined, ...update }),
            );
          }
        },
      });
      if (abort.signal.aborted) return;
      if (asked.timedOut) {
        bus.publish(
          this.status(
            taskId,
            contextId,
            TaskState.TASK_STATE_WORKING,
            `No reply from ${agent} within ${Math.round(this.policy.replyTimeoutMs / 1000)} s; tasks/get tells when it comes`,
          ),
        );
        return;
      }
      this.endHere(taskId);
      bus.publish(this.ended(taskId, contextId, asked.reader));
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      // What the chat service refused (a quota, an agent it cannot reach): the task fails, saying so.
      this.endHere(taskId);
      bus.publish(this.status(taskId, contextId, TaskState.TASK_STATE_FAILED, err.message));
    } finally {
      this.running.delete(taskId);
      bus.finished();
    }
  }

  cancelTask = async (taskId: string, bus: ExecutionEventBus): Promise<void> => {
    const wait = this.running.get(taskId);
    if (!wait) return;
    wait.abort.abort();
    this.endHere(taskId);
    // The message has gone to the agent: what it answers still shows in the chat session.
    bus.publish(
      this.status(taskId, wait.contextId, TaskState.TASK_STATE_CANCELED, 'Canceled by the caller'),
    );
  };

  /**
   * A task still open that no wait of this process follows, brought up to date from its chat
   * session: completed or failed once the reply (or the failure) is there. Undefined when
   * nothing changed.
   */
  async reconcile(task: Task, context: ServerCallContext): Promise<Task | undefined> {
    if (FINAL.has(task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED)) return undefined;
    if (this.running.has(task.id) || this.endedHere.has(task.id)) return undefined;
    const caller = callerOf(context);
    const { a2a, chat } = this.store.repos;
    const session = await a2a.contextSession(context.tenant!, caller.userName, task.contextId);
    if (session === undefined) return undefined;
    const sent = await chat.sentMessage(session, task.id);
    if (!sent) return undefined;
    const reader = new ReplyReader(task.id);
    const pieces: ReplyPiece[] = [];
    let after = sent.id;
    for (;;) {
      const rows = await chat.entries(session, after, 100);
      for (const row of rows) {
        after = row.id;
        pieces.push(...reader.take(chatEntryView(row)));
      }
      if (rows.length < 100 || reader.done) break;
    }
    if (!reader.done) return undefined;
    const status = this.finalStatus(task.id, task.contextId, reader);
    const artifact = reply(pieces);
    return {
      ...task,
      status,
      artifacts: artifact ? [artifact] : task.artifacts,
      history: status.message ? [...task.history, status.message] : task.history,
    };
  }

  /** Notes that this process ends the task (for a minute: long enough for the SDK to store it). */
  private endHere(taskId: string): void {
    this.endedHere.add(taskId);
    setTimeout(() => this.endedHere.delete(taskId), ENDED_HERE_MS).unref();
  }

  /** The chat session the caller's context with the agent is carried in (opened the first time). */
  private async sessionFor(agent: string, caller: A2aCaller, contextId: string): Promise<string> {
    const { a2a } = this.store.repos;
    const known = await a2a.contextSession(agent, caller.userName, contextId);
    if (known !== undefined) return known;
    const session = await this.chat.open(caller.speaksAs, agent);
    await a2a.addContext({
      agent,
      caller: caller.userName,
      context_id: contextId,
      session_id: session.id,
      created_at: this.clock.now(),
    });
    // Two first messages of one context at once: the one kept is the session both go on in.
    return (await a2a.contextSession(agent, caller.userName, contextId)) ?? session.id;
  }

  /** The final status of a task whose wait is over. */
  private ended(taskId: string, contextId: string, reader: ReplyReader) {
    return AgentEvent.statusUpdate({
      taskId,
      contextId,
      status: this.finalStatus(taskId, contextId, reader),
      metadata: undefined,
    });
  }

  private finalStatus(taskId: string, contextId: string, reader: ReplyReader): TaskStatus {
    const at = this.now();
    switch (reader.outcome) {
      case 'failed':
        return {
          state: TaskState.TASK_STATE_FAILED,
          message: a2aMessage(Role.ROLE_AGENT, [textPart(reader.failure!)], { taskId, contextId }),
          timestamp: at,
        };
      case 'ended':
        return {
          state: TaskState.TASK_STATE_COMPLETED,
          message: a2aMessage(
            Role.ROLE_AGENT,
            [textPart('The agent ended the conversation without a reply')],
            { taskId, contextId },
          ),
          timestamp: at,
        };
      default:
        return {
          state: TaskState.TASK_STATE_COMPLETED,
          message: agentMessage(taskId, contextId, reader),
          timestamp: at,
        };
    }
  }

  private status(taskId: string, contextId: string, state: TaskState, text?: string) {
    return AgentEvent.statusUpdate({
      taskId,
      contextId,
      status: {
        state,
        message:
          text === undefined
            ? undefined
            : a2aMessage(Role.ROLE_AGENT, [textPart(text)], { taskId, contextId }),
        timestamp: this.now(),
      },
      metadata: undefined,
    });
  }

  private now(): string {
    return new Date(this.clock.now()).toISOString();
  }
}

/** The caller a call context carries (the route always puts one there). */
function callerOf(context: ServerCallContext): A2aCaller {
  const user = context.user;
  if (!(user instanceof A2aCaller)) throw new Error('A2A call without its caller');
  return user;
}

/** The text an A2A message carries, its text parts joined (the route checks there is some). */
export function textOf(message: Message): string {
  return textOfParts(message.parts, '\n');
}

/** The agent's reply as one A2A message: its text, joined, and its files. */
function agentMessage(taskId: string, contextId: string, reader: ReplyReader): Message {
  const parts: Part[] = [];
  if (reader.text !== null) parts.push(textPart(reader.text));
  for (const entry of reader.entries) {
    for (const part of entry.content ?? []) {
      if (part.type !== 'resource') continue;
      for (const resource of [part.resource].flat()) parts.push(filePart(resource.uri));
    }
  }
  return a2aMessage(Role.ROLE_AGENT, parts, { taskId, contextId });
}

/** The reply artifact as the pieces read make it whole. */
function reply(pieces: ReplyPiece[]) {
  const parts: Part[] = [];
  const text = pieces.flatMap((piece) => (piece.kind === 'text' ? [piece.text] : [])).join('');
  if (text !== '') parts.push(textPart(text));
  for (const piece of pieces) if (piece.kind === 'file') parts.push(filePart(piece.uri));
  if (parts.length === 0) return undefined;
  return {
    artifactId: REPLY_ARTIFACT,
    name: REPLY_ARTIFACT,
    description: '',
    parts,
    metadata: undefined,
    extensions: [],
  };
}

/**
 * The artifact updates what the agent said makes: each chunk of a streamed reply appended to
 * the reply artifact (the last one once the stream ends), a whole message as the artifact.
 */
function artifactUpdates(pieces: ReplyPiece[], begun: boolean) {
  const updates: {
    artifact: NonNullable<ReturnType<typeof reply>>;
    append: boolean;
    lastChunk: boolean;
  }[] = [];
  let appended = begun;
  for (const piece of pieces) {
    let parts: Part[];
    let last: boolean;
    if (piece.kind === 'text') {
      parts = [textPart(piece.text)];
      last = !piece.streamed;
    } else if (piece.kind === 'file') {
      parts = [filePart(piece.uri)];
      last = false;
    } else if (piece.kind === 'stream-end') {
      parts = [];
      last = true;
    } else continue;
    updates.push({
      artifact: {
        artifactId: REPLY_ARTIFACT,
        name: REPLY_ARTIFACT,
        description: '',
        parts,
        metadata: undefined,
        extensions: [],
      },
      append: appended,
      lastChunk: last,
    });
    appended = true;
  }
  return updates;
}
