import { request as httpRequest, type ClientRequest } from 'node:http';
import type { RunningService } from './server.js';

/** One open Server-Sent Events stream: the request (destroy it to close) and its events so far. */
export interface OpenEventStream {
  request: ClientRequest;
  /** Events with data the stream sent so far. */
  entries: number;
}

/**
 * Opens `path` of the service as a Server-Sent Events stream on a connection of its own, as a
 * browser's EventSource does, with the service's first API key; resolves once the server
 * answered 200. `onEvent` hears each event's name (`message` unless named) and data line,
 * as it arrives.
 */
export function openEventStream(
  service: RunningService,
  path: string,
  onEvent?: (event: string, data: string) => void,
): Promise<OpenEventStream> {
  return new Promise((resolve, reject) => {
    const stream: OpenEventStream = { request: undefined as unknown as ClientRequest, entries: 0 };
    const request = httpRequest(
      `${service.url}${path}`,
      {
        method: 'GET',
        headers: { authorization: `Bearer ${service.apiKey}`, accept: 'text/event-stream' },
        agent: false,
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new Error(`the stream ${path} answered ${res.statusCode}`));
          return;
        }
        res.setEncoding('utf8');
        let buffer = '';
        res.on('data', (chunk: string) => {
          buffer += chunk;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = block.indexOf('data: ');
            if (data < 0) continue;
            stream.entries += 1;
            if (!onEvent) continue;
            const named = block.includes('event: ') ? /^event: (.*)$/m.exec(block) : null;
            const event = named?.[1] ?? 'message';
            onEvent(event, block.slice(data + 6));
          }
        });
        res.on('error', () => undefined);
        resolve(stream);
      },
    );
    stream.request = request;
    request.on('error', reject);
    request.end();
  });
}
