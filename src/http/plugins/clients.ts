import type { FastifyInstance } from 'fastify';
import { RateLimitedError } from '../../errors.js';
import { forwardedFor, type TrustedProxies } from '../../infra/trusted-proxies.js';
import type { Logger } from '../../logger.js';

export interface ClientOptions {
  trusted: TrustedProxies;
  /**
   * Requests one forwarded client address may have in progress at once (0: no limit): behind
   * a trusted proxy, what the per-address connection cap is to direct clients.
   */
  maxRequestsPerClient: number;
  logger: Logger;
  /** Hears each request refused for that limit. */
  refused?: (client: string) => void;
}

/**
 * Who the client of a request is. A request from a trusted proxy is its forwarded client's:
 * Fastify's `trustProxy` (given {@link TrustedProxies.trusts}) makes `request.ip` the first
 * address, from the end of `X-Forwarded-For`, that is not a trusted proxy; a trusted proxy
 * that sends only an RFC 7239 `Forwarded` header has its `for=` nodes read the same way. From
 * anyone else the headers are ignored, and the first such request is logged once as a warning
 * (a proxy missing from `AGENTRY_TRUSTED_PROXIES` makes the whole network one client).
 *
 * Forwarded clients cannot be capped per connection (they share the proxy's), so their
 * requests in progress are: past `maxRequestsPerClient`, a request is answered 429 at once.
 */
export function installClients(app: FastifyInstance, options: ClientOptions): void {
  const { trusted, maxRequestsPerClient, logger, refused } = options;
  const inProgress = new Map<string, number>();
  let warned = false;

  app.addHook('onRequest', async (request, reply) => {
    const socketAddress = request.raw.socket.remoteAddress;
    const headers = request.raw.headers;
    if (!trusted.trusts(socketAddress)) {
      if (
        !warned &&
        (headers['x-forwarded-for'] !== undefined || headers.forwarded !== undefined)
      ) {
        warned = true;
        logger.warn(
          { address: socketAddress, setting: 'AGENTRY_TRUSTED_PROXIES' },
          'requests arrive with forwarding headers (X-Forwarded-For or Forwarded) from an address that is not a trusted proxy: the headers are ignored and everything it forwards counts as one client. If it is your reverse proxy, add its address to AGENTRY_TRUSTED_PROXIES (logged once)',
        );
      }
      return;
    }
    if (headers['x-forwarded-for'] === undefined && typeof headers.forwarded === 'string') {
      const nodes = forwardedFor(headers.forwarded);
      if (nodes.length > 0) headers['x-forwarded-for'] = nodes.join(', ');
    }
    if (maxRequestsPerClient <= 0) return;
    const client = request.ip;
    // The proxy's own requests (its health checks) forward no one.
    if (client === socketAddress) return;
    const count = (inProgress.get(client) ?? 0) + 1;
    if (count > maxRequestsPerClient) {
      refused?.(client);
      throw new RateLimitedError(
        1,
        `Too many requests in progress from this client address (at most ${maxRequestsPerClient} at once): retry once some have been answered`,
      );
    }
    inProgress.set(client, count);
    reply.raw.once('close', () => {
      const left = (inProgress.get(client) ?? 1) - 1;
      if (left > 0) inProgress.set(client, left);
      else inProgress.delete(client);
    });
  });
}
