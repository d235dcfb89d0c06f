/** Reading a Server-Sent Events stream the way a browser's EventSource does. */

export interface StreamEvent {
  id: string | undefined;
  /** The event's name (`event:`), undefined for an unnamed (`message`) event. */
  event?: string;
  data: string;
}

export interface OpenStream {
  status: number;
  headers: Headers;
  /** The next event, or an error after `timeoutMs`. */
  next(timeoutMs?: number): Promise<StreamEvent>;
  /** Events until none comes for `quietMs`. */
  drain(quietMs?: number): Promise<StreamEvent[]>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
}

export async function openStream(
  url: string,
  options: { key?: string; lastEventId?: string; headers?: Record<string, string> } = {},
): Promise<OpenStream> {
  const controller = new AbortController();
  const headers: Record<string, string> = { accept: 'text/event-stream', ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  if (options.lastEventId) headers['last-event-id'] = options.lastEventId;
  const response = await fetch(url, { headers, signal: controller.signal });
  const queue: StreamEvent[] = [];
  const waiting: ((event: StreamEvent) => void)[] = [];
  let buffer = '';
  const deliver = (event: StreamEvent): void => {
    const waiter = waiting.shift();
    if (waiter) waiter(event);
    else queue.push(event);
  };
  const ended = (async () => {
    if (!response.body) return;
    const decoder = new TextDecoder();
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let id: string | undefined;
          let event: string | undefined;
          const data: string[] = [];
          for (const line of block.split('\n')) {
            if (line.startsWith('id: ')) id = line.slice(4);
            else if (line.startsWith('event: ')) event = line.slice(7);
            else if (line.startsWith('data: ')) data.push(line.slice(6));
          }
          if (data.length > 0) {
            deliver({ id, ...(event !== undefined && { event }), data: data.join('\n') });
          }
        }
      }
    } catch {
      // Closed by this side.
    }
  })();
  const next = (timeoutMs = 5000): Promise<StreamEvent> => {
    const queued = queue.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const index = waiting.indexOf(take);
        if (index >= 0) waiting.splice(index, 1);
        reject(new Error(`no event within ${timeoutMs} ms`));
      }, timeoutMs);
      const take = (event: StreamEvent): void => {
        clearTimeout(timer);
        resolve(event);
      };
      waiting.push(take);
    });
  };
  return {
    status: response.status,
    headers: response.headers,
    next,
    drain: async (quietMs = 500) => {
      const events: StreamEvent[] = [];
      for (;;) {
        try {
          events.push(await next(quietMs));
        } catch {
          return events;
        }
      }
    },
    ended,
    close: () => controller.abort(),
  };
}
