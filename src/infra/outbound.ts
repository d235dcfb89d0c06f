import { lookup, type LookupAddress, type LookupAllOptions, type LookupOneOptions } from 'node:dns';
import ipaddr from 'ipaddr.js';
import { Agent, buildConnector, type Dispatcher } from 'undici';

/**
 * Outbound HTTP for the proxy. A registered URL is chosen by whoever registers an agent, so
 * by default nothing may reach this machine, its private networks or a cloud metadata
 * service through it (SSRF). The check applies to the address actually connected to, after
 * DNS resolution, so a name that resolves differently later (DNS rebinding) gains nothing.
 */

/** A connection refused because the target is on a private or special-purpose network. */
export class PrivateTargetError extends Error {
  override readonly name = 'PrivateTargetError';
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(`${host} resolves to ${address}, a private or special-purpose address`);
  }
}

/**
 * The address whose range decides: an IPv4 address carried inside IPv6 (IPv4-mapped,
 * IPv4-compatible `::a.b.c.d`, NAT64 or 6to4) is judged as the IPv4 address it routes to.
 */
function judgedAddress(address: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  if (address.kind() === 'ipv4') return address;
  const v6 = address as ipaddr.IPv6;
  const ipv4From = (high: number, low: number): ipaddr.IPv4 =>
    new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  switch (v6.range()) {
    case 'ipv4Mapped':
      return v6.toIPv4Address();
    case 'rfc6052':
      return ipv4From(v6.parts[6]!, v6.parts[7]!);
    case '6to4':
      return ipv4From(v6.parts[1]!, v6.parts[2]!);
    default:
      return isIpv4Compatible(v6) ? ipv4From(v6.parts[6]!, v6.parts[7]!) : v6;
  }
}

/** `::a.b.c.d` (deprecated, but still parsed and routed by some stacks); not `::` or `::1`. */
function isIpv4Compatible(v6: ipaddr.IPv6): boolean {
  return v6.parts.slice(0, 6).every((part) => part === 0) && v6.parts[6] !== 0;
}

/**
 * True for addresses the proxy must not reach by default: anything outside global unicast
 * (loopback, private, link-local, unique-local, carrier-grade NAT, metadata, multicast,
 * reserved and documentation ranges), as classified by ipaddr.js.
 */
export function isPrivateAddress(address: string): boolean {
  const bare = address.replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
  if (!ipaddr.isValid(bare)) return false;
  return judgedAddress(ipaddr.parse(bare)).range() !== 'unicast';
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * The rule for a name: of the addresses it resolves to, only the public ones may be connected
 * to; when there is none, the connection is refused.
 */
function publicOf(
  hostname: string,
  addresses: LookupAddress[],
): LookupAddress[] | PrivateTargetError {
  const allowed = addresses.filter((entry) => !isPrivateAddress(entry.address));
  return allowed.length > 0
    ? allowed
    : new PrivateTargetError(hostname, addresses[0]?.address ?? '?');
}

/** dns.lookup for net.connect that only ever yields public addresses. */
function publicLookup(
  hostname: string,
  options: LookupOneOptions | LookupAllOptions,
  callback: LookupCallback,
): void {
  lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const allowed = publicOf(hostname, addresses);
    if (allowed instanceof PrivateTargetError) return callback(allowed, []);
    if (options.all) callback(null, allowed);
    else callback(null, allowed[0]!.address, allowed[0]!.family);
  });
}

/**
 * How the guard (when private targets are not allowed) judges a connection to this URL's host
 * now, by the rule it connects by: refused (the reason), `unresolved` when the name does not
 * resolve now (it may later), or undefined when it would let one through. For a clear answer
 * where a URL is given: the guard still judges each connection where it is made.
 */
export async function judgeTarget(
  url: string,
): Promise<PrivateTargetError | 'unresolved' | undefined> {
  const hostname = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
  if (isPrivateAddress(hostname)) return new PrivateTargetError(hostname, hostname);
  let addresses: LookupAddress[];
  try {
    addresses = await lookupAll(hostname);
  } catch {
    return 'unresolved';
  }
  const allowed = publicOf(hostname, addresses);
  return allowed instanceof PrivateTargetError ? allowed : undefined;
}

/**
 * Why the guard would refuse every connection to this URL ({@link judgeTarget}); undefined
 * when it would let one through, or when the name does not resolve now.
 */
export async function refusedTarget(url: string): Promise<PrivateTargetError | undefined> {
  const judged = await judgeTarget(url);
  return judged === 'unresolved' ? undefined : judged;
}

function lookupAll(hostname: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) =>
    lookup(hostname, { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
  );
}

/**
 * The dispatcher the proxy forwards with. Unless private targets are allowed, literal
 * addresses are checked before connecting and names when they resolve.
 */
export function createOutboundDispatcher(options: { allowPrivateTargets: boolean }): Dispatcher {
  if (options.allowPrivateTargets) return new Agent();
  const connect = buildConnector({ lookup: publicLookup } as buildConnector.BuildOptions);
  return new Agent({
    connect: (target, callback) => {
      if (isPrivateAddress(target.hostname)) {
        callback(new PrivateTargetError(target.hostname, target.hostname), null);
        return;
      }
      connect(target, callback);
    },
  });
}
