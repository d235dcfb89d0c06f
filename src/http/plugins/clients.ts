import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ForwardedHeader } from '../../config/index.js';
import { RateLimitedError } from '../../errors.js';
import { forwardedFor, type TrustedProxies } from '../../infra/trusted-proxies.js';
import type { Logger } from '../../logger.js';

export interface ClientOptions {
  trusted: TrustedProxies;
  /** The one header the trusted proxies name their client in. */
  header: ForwardedHeader;
  /**
   * Requests one forwarded client address may have in progress at once (0: no limit): behind
   * a trusted proxy, what the per-address connection cap is to direct clients.
   */
  maxRequestsPerClient: number;
  logger: Logger;
  /** Hears each request refused for that limit. */
  refused?: (client: string) => void;
}

/** Requests a trusted proxy made for itself (health checks): they forward no one. */
const proxysOwn = new WeakSet<FastifyRequest>();

/**
 * Whether a trusted proxy made the request for itself: it came from the proxy with no
 * forwarding header at all. A request that forwards a client is that client's, whatever
 * address it names (a forwarded loopback address too).
 */
export function isProxysOwnRequest(request: FastifyRequest): boolean {
  return proxysOwn.has(request);
}

/**
 * Who the client of a request is. A request from a trusted proxy is its forwarded client's, as
 * named by the one header the operator chose (`AGENTRY_FORWARDED_HEADER`): Fastify's
 * `trustProxy` (given {@link TrustedProxies.trusts}) makes `request.ip` the first address, from
 * the end of the list, that is not a trusted proxy (the first of the list when all are). The
 * other header is ignored, as a client may have written it and a proxy pass it on; for
 * `forwarded`, the `for=` nodes of that header replace any `X-Forwarded-For`. From anyone else
 * both headers are ignored, and the first such request is logged once as a warning (a proxy
 * missing from `AGENTRY_TRUSTED_PROXIES` makes the whole network one client).
 *
 * Forwarded clients cannot be capped per connection (they share the proxy's), so their
 * requests in progress are: past `maxRequestsPerClient`, a request is answered 429 at once.
 */
export function installClients(app: FastifyInstance, options: ClientOptions): void {
  const { trusted, header, maxRequestsPerClient, logger, refused } = options;
  const inProgress = new Map<string, number>();
  let warned = false;
  let warnedHeader = false;

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
    const named = headers[header];
    const other = header === 'forwarded' ? headers['x-forwarded-for'] : headers.forwarded;
    if (header === 'forwarded') {
      // Fastify reads X-Forwarded-For: it is given the nodes of Forwarded, and nothing else.
      const nodes = typeof named === 'string' ? forwardedFor(named) : [];
      if (nodes.length > 0) headers['x-forwarded-for'] = nodes.join(', ');
      else delete headers['x-forwarded-for'];
    }
    if (named === undefined) {
      if (other === undefined) {
        proxysOwn.add(request);
        return;
      }
      // The proxy forwards someone without the header it was said to use: counted as the
      // proxy's address, never as its own request.
      if (!warnedHeader) {
        warnedHeader = true;
        logger.warn(
          { address: socketAddress, setting: 'AGENTRY_FORWARDED_HEADER', header },
          `a trusted proxy forwards requests without the ${header} header AGENTRY_FORWARDED_HEADER names, with the other one: they count as one client. If your proxy names clients in that header, set AGENTRY_FORWARDED_HEADER to it (logged once)`,
        );
      }
    }
    if (maxRequestsPerClient <= 0) return;
    const client = request.ip;
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
