import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens on a free loopback port; resolves to the server's base URL, such as http://127.0.0.1:41234. */
export async function listenOnLoopback(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Closes the server at once, its keep-alive and unfinished connections included. */
export async function closeNow(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

/** An agent's own endpoint on loopback: `/fail` answers 503, any other path 200 `{}`. */
export async function startEndpoint(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      if (request.url === '/fail') response.writeHead(503).end('down');
      else response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  return { url: await listenOnLoopback(server), close: () => closeNow(server) };
}
