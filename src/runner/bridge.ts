import { once } from 'node:events';
import { chmod, lchown, rm } from 'node:fs/promises';
import { createServer, connect, type Server as NetServer } from 'node:net';

/**
 * How an agent reaches Agentry: through a unix socket joined to the public URL when its sandbox
 * has no network of its own, or on a loopback port where agents share the network.
 */

/** Connections one agent may have open to Agentry through its bridge. */
const MAX_BRIDGE_CONNECTIONS = 64;

/** A loopback port free now (for an agent's server where agents share the network). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * The unix socket through which an agent without a network reaches Agentry: each connection
 * is joined to a new connection to the public URL's host and port.
 */
export async function openBridge(
  path: string,
  publicUrl: string,
  uid: number | undefined,
): Promise<NetServer> {
  const url = new URL(publicUrl);
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  const host = url.hostname.replace(/^\[|\]$/g, '');
  await rm(path, { force: true });
  const server = createServer((client) => {
    const upstream = connect({ host, port });
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.maxConnections = MAX_BRIDGE_CONNECTIONS;
  server.listen(path);
  await once(server, 'listening');
  await chmod(path, 0o600);
  if (uid !== undefined) await lchown(path, uid, uid);
  return server;
}
