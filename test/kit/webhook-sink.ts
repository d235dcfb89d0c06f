import { createServer, type Server as HttpServer } from 'node:http';
import type { WebhookPayload } from '../../src/wire/webhooks.js';
import { closeNow, listenOnLoopback } from './loopback.js';

/** A webhook receiver on loopback that answers 200 to everything and keeps what it was sent. */
export async function startWebhookSink(): Promise<{
  url: string;
  received: WebhookPayload[];
  close(): Promise<void>;
}> {
  const received: WebhookPayload[] = [];
  const server: HttpServer = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      received.push(JSON.parse(body) as WebhookPayload);
      response.writeHead(200).end();
    });
  });
  const url = await listenOnLoopback(server);
  return { url, received, close: () => closeNow(server) };
}
