/** Small helpers for calling a running server the way a client does. */
import { Agent, fetch as undiciFetch } from 'undici';

export interface JsonResponse<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface CallOptions {
  key?: string;
  /** Full Authorization header value; wins over `key`. */
  authorization?: string;
  body?: unknown;
  /** Sent as is (for malformed bodies). */
  rawBody?: string;
  headers?: Record<string, string>;
  /**
   * The loopback address to connect from (any of 127.0.0.0/8), so that one test can be
   * several clients to a server that tells clients apart by address.
   */
  localAddress?: string;
}

const fromAddress = new Map<string, Agent>();

function dispatcherFrom(localAddress: string): Agent {
  let agent = fromAddress.get(localAddress);
  if (!agent) {
    agent = new Agent({ localAddress });
    fromAddress.set(localAddress, agent);
  }
  return agent;
}

export async function call<T = any>(
  baseUrl: string,
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<JsonResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.authorization) headers.authorization = options.authorization;
  else if (options.key) headers.authorization = `Bearer ${options.key}`;
  let body: string | undefined;
  if (options.rawBody !== undefined) {
    body = options.rawBody;
    headers['content-type'] ??= 'application/json';
  } else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] = 'application/json';
  }
  const response = options.localAddress
    ? await undiciFetch(baseUrl + path, {
        method,
        headers,
        body,
        dispatcher: dispatcherFrom(options.localAddress),
      })
    : await fetch(baseUrl + path, { method, headers, body });
  // A stream (Server-Sent Events) never ends by itself: its first chunk is what is read.
  const text = (response.headers.get('content-type') ?? '').startsWith('text/event-stream')
    ? await firstChunk(response)
    : await response.text();
  let parsed: unknown = undefined;
  if (text.length > 0 && (response.headers.get('content-type') ?? '').includes('json')) {
    parsed = JSON.parse(text);
  }
  return { status: response.status, headers: response.headers, body: parsed as T, text };
}

/** The first chunk of a body, the rest cancelled (the connection closes). */
export async function firstChunk(response: {
  body: ReadableStream<Uint8Array> | null;
}): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return '';
  const { value } = await reader.read();
  await reader.cancel();
  return value ? Buffer.from(value).toString('utf8') : '';
}
