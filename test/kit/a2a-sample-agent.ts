import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server as HttpServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AgentCard,
  Role,
  TaskState,
  type Message,
  type TaskArtifactUpdateEvent,
} from '@a2a-js/sdk';
import {
  AgentEvent,
  DefaultRequestHandler,
  InMemoryTaskStore,
  JsonRpcTransportHandler,
  ServerCallContext,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
} from '@a2a-js/sdk/server';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { a2aMessage, textOfParts, textPart } from '../../src/services/a2a/parts.js';
import { closeNow, listenOnLoopback } from './loopback.js';

/** How the sample agent answers a message's text. */
export type SampleReply =
  /** A message: the text given back, prefixed. */
  | { kind: 'echo'; prefix: string }
  /** A task that completes with one artifact: the text given back, prefixed. */
  | { kind: 'task'; prefix: string }
  /** As `echo`, after `delayMs`. */
  | { kind: 'slow'; delayMs: number; prefix: string }
  /**
   * A task answered while it is still working, which completes as `task` does after `delayMs`:
   * the caller asks for it again until it does.
   */
  | { kind: 'later'; delayMs: number; prefix: string }
  /** A task that fails, its status saying `message`. */
  | { kind: 'fail'; message: string };

export interface SampleSkill {
  id: string;
  name: string;
  description: string;
  tags: string[];
  examples: string[];
}

export interface SampleAgentOptions {
  name?: string;
  description?: string;
  skills?: SampleSkill[];
  reply?: SampleReply;
  /** The A2A version the card declares: 1.0 (`supportedInterfaces`) or 0.3 (`url`). */
  version?: '1.0' | '0.3';
}

/** What the sample agent was told: each user message's text, in its conversation. */
export interface SampleHeard {
  text: string;
  contextId: string;
}

export interface SampleAgent {
  /** Its base URL (http://127.0.0.1:port). */
  url: string;
  /** Where its card is read. */
  cardUrl: string;
  /** Its JSON-RPC endpoint. */
  rpcUrl: string;
  heard: SampleHeard[];
  /** The JSON-RPC methods it was called with, in order (`SendMessage`, `GetTask`, `message/send`…). */
  methods: string[];
  /** Changes what its card says from now on (a refresh reads the new one). */
  setCard(changes: Partial<Pick<SampleAgentOptions, 'name' | 'description' | 'skills'>>): void;
  /** Serves `body` (with `contentType`) at the card's URL instead of the card; undefined: the card. */
  serveInstead(body: string | undefined, contentType?: string): void;
  /** The JSON-RPC interface the card names, instead of its own (undefined: its own). */
  setInterfaceUrl(url: string | undefined): void;
  setReply(reply: SampleReply): void;
  close(): Promise<void>;
}

export const SAMPLE_SKILLS: SampleSkill[] = [
  {
    id: 'haiku',
    name: 'Haiku writing',
    description: 'Writes a haiku about any subject',
    tags: ['poetry', 'haiku'],
    examples: ['a haiku about the sea'],
  },
];

/**
 * An external A2A agent built with the official SDK's server pieces (its request handler and
 * JSON-RPC transport handlers, 1.0 and the 0.3 compat one), served by a node:http server on
 * loopback: its card at `/.well-known/agent-card.json`, JSON-RPC at `/a2a/jsonrpc`.
 */
export async function startSampleA2aAgent(options: SampleAgentOptions = {}): Promise<SampleAgent> {
  const state = {
    name: options.name ?? 'Sample Haiku Agent',
    description: options.description ?? 'Answers with poems',
    skills: options.skills ?? SAMPLE_SKILLS,
    reply: options.reply ?? ({ kind: 'echo', prefix: 'A2A says: ' } as SampleReply),
    instead: undefined as { body: string; contentType: string } | undefined,
    interfaceUrl: undefined as string | undefined,
  };
  const version = options.version ?? '1.0';
  const heard: SampleHeard[] = [];
  const methods: string[] = [];
  let url = '';
  const rpcUrl = () => state.interfaceUrl ?? `${url}/a2a/jsonrpc`;

  /** The card as the SDK's server holds it: both versions at one endpoint. */
  const coreCard = (): AgentCard =>
    AgentCard.fromJSON({
      name: state.name,
      description: state.description,
      version: '1.0.0',
      supportedInterfaces: [
        { url: rpcUrl(), protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
        { url: rpcUrl(), protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
      ],
      capabilities: { streaming: false, pushNotifications: false },
      defaultInputModes: ['text/plain'],
      defaultOutputModes: ['text/plain'],
      skills: state.skills,
    });
  /** The card as served: A2A 1.0's JSON, or the 0.3 shape. */
  const servedCard = (): unknown => {
    if (version === '1.0') {
      const card = coreCard();
      return AgentCard.toJSON({
        ...card,
        supportedInterfaces: card.supportedInterfaces.slice(0, 1),
      });
    }
    return {
      protocolVersion: '0.3.0',
      name: state.name,
      description: state.description,
      url: rpcUrl(),
      preferredTransport: 'JSONRPC',
      version: '1.0.0',
      capabilities: { streaming: false, pushNotifications: false },
      defaultInputModes: ['text/plain'],
      defaultOutputModes: ['text/plain'],
      skills: state.skills,
    };
  };

  const executor: AgentExecutor = {
    execute: async (context: RequestContext, bus: ExecutionEventBus) => {
      const text = textOfParts(context.userMessage.parts);
      heard.push({ text, contextId: context.contextId });
      const reply = state.reply;
      switch (reply.kind) {
        case 'fail':
          bus.publish(
            AgentEvent.task({
              id: context.taskId,
              contextId: context.contextId,
              status: {
                state: TaskState.TASK_STATE_FAILED,
                message: agentMessage(context, reply.message),
                timestamp: now(),
              },
              artifacts: [],
              history: [context.userMessage],
              metadata: undefined,
            }),
          );
          break;
        case 'slow':
          await sleep(reply.delayMs);
          bus.publish(AgentEvent.message(agentMessage(context, `${reply.prefix}${text}`)));
          break;
        case 'echo':
          bus.publish(AgentEvent.message(agentMessage(context, `${reply.prefix}${text}`)));
          break;
        case 'later': {
          const base = {
            taskId: context.taskId,
            contextId: context.contextId,
            metadata: undefined,
          };
          bus.publish(
            AgentEvent.task({
              id: context.taskId,
              contextId: context.contextId,
              status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: now() },
              artifacts: [],
              history: [context.userMessage],
              metadata: undefined,
            }),
          );
          // The bus stays open on a working task (see the handler's options): it completes later.
          setTimeout(() => {
            bus.publish(AgentEvent.artifactUpdate(answerArtifact(base, `${reply.prefix}${text}`)));
            bus.publish(
              AgentEvent.statusUpdate({
                ...base,
                status: {
                  state: TaskState.TASK_STATE_COMPLETED,
                  message: undefined,
                  timestamp: now(),
                },
              }),
            );
            bus.finished();
          }, reply.delayMs);
          return;
        }
        case 'task': {
          const base = {
            taskId: context.taskId,
            contextId: context.contextId,
            metadata: undefined,
          };
          bus.publish(
            AgentEvent.task({
              id: context.taskId,
              contextId: context.contextId,
              status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: now() },
              artifacts: [],
              history: [context.userMessage],
              metadata: undefined,
            }),
          );
          bus.publish(AgentEvent.artifactUpdate(answerArtifact(base, `${reply.prefix}${text}`)));
          bus.publish(
            AgentEvent.statusUpdate({
              ...base,
              status: {
                state: TaskState.TASK_STATE_COMPLETED,
                message: undefined,
                timestamp: now(),
              },
            }),
          );
          break;
        }
      }
      bus.finished();
    },
    cancelTask: async () => {},
  };
  // A working task keeps its bus, so that a task answered unfinished (`later`) completes.
  const newHandler = () =>
    new DefaultRequestHandler(
      coreCard(),
      new InMemoryTaskStore(),
      executor,
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      {
        keepBusAliveStates: [
          TaskState.TASK_STATE_WORKING,
          TaskState.TASK_STATE_INPUT_REQUIRED,
          TaskState.TASK_STATE_AUTH_REQUIRED,
        ],
      },
    );
  // Made once the server listens, when the card knows its URL.
  let handler!: DefaultRequestHandler;
  const v1 = () => new JsonRpcTransportHandler(handler);
  const legacy = () => new LegacyJsonRpcTransportHandler(handler);

  const server: HttpServer = createServer((request, response) => {
    void (async () => {
      const body = await readBody(request);
      // The card is served whatever the query: one card, under several URLs.
      const path = new URL(request.url ?? '/', url).pathname;
      if (request.method === 'GET' && path === '/.well-known/agent-card.json') {
        if (state.instead) {
          response.writeHead(200, { 'content-type': state.instead.contentType });
          response.end(state.instead.body);
          return;
        }
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify(servedCard()));
        return;
      }
      if (request.method === 'POST' && path === '/a2a/jsonrpc') {
        const asked = header(request, 'a2a-version');
        methods.push(methodOf(body));
        const context = new ServerCallContext({ requestedVersion: asked ?? '0.3' });
        const rpc = state.reply.kind === 'later' ? answeringAtOnce(body) : body;
        const answer = asked?.startsWith('1')
          ? await v1().handle(rpc, context)
          : await legacy().handle(rpc, context);
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify(answer));
        return;
      }
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    })().catch((err: unknown) => {
      response.writeHead(500, { 'content-type': 'text/plain' }).end(String(err));
    });
  });
  url = await listenOnLoopback(server);
  handler = newHandler();
  return {
    url,
    cardUrl: `${url}/.well-known/agent-card.json`,
    rpcUrl: `${url}/a2a/jsonrpc`,
    heard,
    methods,
    setCard: (changes) => {
      Object.assign(state, changes);
      handler = newHandler();
    },
    serveInstead: (body, contentType = 'text/html') => {
      state.instead = body === undefined ? undefined : { body, contentType };
    },
    setInterfaceUrl: (interfaceUrl) => {
      state.interfaceUrl = interfaceUrl;
    },
    setReply: (reply) => {
      state.reply = reply;
    },
    close: () => closeNow(server),
  };
}

/**
 * The request as a non-blocking send (A2A 1.0 `returnImmediately`, 0.3 `blocking: false`): an
 * agent that answers a task at once, unfinished, whatever its caller asked.
 */
function answeringAtOnce(body: string): string {
  try {
    const request = JSON.parse(body) as { method?: string; params?: Record<string, unknown> };
    if (request.method !== 'SendMessage' && request.method !== 'message/send') return body;
    const params = request.params ?? {};
    const configuration = (params.configuration ?? {}) as Record<string, unknown>;
    params.configuration =
      request.method === 'SendMessage'
        ? { ...configuration, returnImmediately: true }
        : { ...configuration, blocking: false };
    return JSON.stringify({ ...request, params });
  } catch {
    return body;
  }
}

function methodOf(body: string): string {
  try {
    return String((JSON.parse(body) as { method?: unknown }).method);
  } catch {
    return '(not JSON)';
  }
}

function header(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function now(): string {
  return new Date().toISOString();
}

/** The artifact a task's answer is: one text part. */
function answerArtifact(
  base: { taskId: string; contextId: string; metadata: undefined },
  text: string,
): TaskArtifactUpdateEvent {
  return {
    ...base,
    artifact: {
      artifactId: randomUUID(),
      name: 'answer',
      description: '',
      parts: [textPart(text)],
      metadata: undefined,
      extensions: [],
    },
    append: false,
    lastChunk: true,
  };
}

function agentMessage(context: RequestContext, text: string): Message {
  return a2aMessage(Role.ROLE_AGENT, [textPart(text)], { contextId: context.contextId });
}
