import { Role, type Message, type Task, type TaskState } from '@a2a-js/sdk';
import {
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  type Client,
} from '@a2a-js/sdk/client';
import { a2aMessage, textOfParts, textPart } from '../../src/services/a2a/parts.js';

/** A fetch that carries an API key as its Bearer token (none: as anyone). */
export function keyedFetch(key: string | undefined): typeof fetch {
  if (key === undefined) return fetch;
  return (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${key}`);
    return fetch(input, { ...init, headers });
  };
}

/**
 * The A2A SDK's client for an agent served by Agentry, made as an A2A client makes one: from
 * the URL its card is found under (the agent's base URL), over JSON-RPC.
 */
export async function a2aClient(baseUrl: string, key?: string): Promise<Client> {
  const fetchImpl = keyedFetch(key);
  const factory = new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
  });
  return factory.createFromUrl(`${baseUrl.replace(/\/$/, '')}/`);
}

/** A user's text message, in a context when one is given. */
export function userMessage(text: string, contextId = ''): Message {
  return a2aMessage(Role.ROLE_USER, [textPart(text)], { contextId });
}

/** The text of a message's text parts, joined. */
export function textOfMessage(message: Message | undefined): string {
  return textOfParts(message?.parts);
}

/** What a send answered, as a task (Agentry always answers with one). */
export function asTask(result: Message | Task): Task {
  if (!('status' in result)) throw new Error(`a message, not a task: ${JSON.stringify(result)}`);
  return result;
}

/** Sends `text` with the SDK's client (in `contextId` when given) and answers the task. */
export async function sendText(
  client: Client,
  text: string,
  options: { contextId?: string; returnImmediately?: boolean } = {},
): Promise<Task> {
  return asTask(
    await client.sendMessage({
      tenant: '',
      message: userMessage(text, options.contextId),
      configuration: options.returnImmediately
        ? {
            acceptedOutputModes: [],
            taskPushNotificationConfig: undefined,
            returnImmediately: true,
          }
        : undefined,
      metadata: undefined,
    }),
  );
}

/** Sends `text` as a streaming message; answers the reply's text chunks and the task's states, in order. */
export async function streamText(
  client: Client,
  text: string,
): Promise<{ chunks: string[]; states: TaskState[] }> {
  const chunks: string[] = [];
  const states: TaskState[] = [];
  for await (const event of client.sendMessageStream({
    tenant: '',
    message: userMessage(text),
    configuration: undefined,
    metadata: undefined,
  })) {
    const payload = event.payload;
    if (payload?.$case === 'artifactUpdate') {
      for (const part of payload.value.artifact?.parts ?? []) {
        if (part.content?.$case === 'text') chunks.push(part.content.value);
      }
    }
    if (payload?.$case === 'statusUpdate' && payload.value.status) {
      states.push(payload.value.status.state);
    }
  }
  return { chunks, states };
}

/** The task as it stands now. */
export function taskNow(client: Client, id: string): Promise<Task> {
  return client.getTask({ tenant: '', id, historyLength: undefined });
}
