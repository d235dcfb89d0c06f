import { createServer, type AddressInfo } from 'node:net';

/**
 * A loopback port nobody listens on right now. Servers get a concrete port rather than 0 so
 * that their public URL, and the endpoint URLs derived from it, are the real ones.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
