import { lookup, type LookupAddress, type LookupAllOptions, type LookupOneOptions } from 'node:dns';
import { BlockList, isIP } from 'node:net';
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

const privateRanges = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT (also some cloud metadata services)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, including 169.254.169.254 metadata
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved and broadcast
] as const) {
  privateRanges.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 96], // unspecified, loopback and the deprecated IPv4-compatible form
  ['fe80::', 10], // link-local
  ['fc00::', 7], // unique-local, including fd00:ec2::254 metadata
  ['ff00::', 8], // multicast
] as const) {
  privateRanges.addSubnet(network, prefix, 'ipv6');
}

/**
 * True for addresses the proxy must not reach by default. IPv4-mapped IPv6 addresses are
 * judged as the IPv4 address they carry (BlockList does that), and so are NAT64 and 6to4
 * addresses, which route to the IPv4 address inside them.
 */
export function isPrivateAddress(address: string): boolean {
  const bare = address.replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 4) return privateRanges.check(bare, 'ipv4');
  if (family !== 6) return false;
  if (privateRanges.check(bare, 'ipv6')) return true;
  const embedded = embeddedIpv4(ipv6Bytes(bare));
  return embedded !== undefined && privateRanges.check(embedded, 'ipv4');
}

function ipv6Bytes(address: string): number[] {
  let text = address;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)?.[1];
  if (dotted) {
    const [a, b, c, d] = dotted.split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, -dotted.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const groups = (part: string): number[] =>
    part ? part.split(':').map((g) => parseInt(g, 16)) : [];
  const front = groups(head);
  const back = tail === undefined ? [] : groups(tail);
  const words = [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
  return words.flatMap((word) => [word >> 8, word & 0xff]);
}

function embeddedIpv4(bytes: number[]): string | undefined {
  const nat64 = [0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0];
  if (nat64.every((byte, i) => bytes[i] === byte)) return bytes.slice(12).join('.');
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return bytes.slice(2, 6).join('.'); // 6to4
  return undefined;
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/** dns.lookup for net.connect that only ever yields public addresses. */
function publicLookup(
  hostname: string,
  options: LookupOneOptions | LookupAllOptions,
  callback: LookupCallback,
): void {
  lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const allowed = addresses.filter((entry) => !isPrivateAddress(entry.address));
    const first = allowed[0];
    if (first === undefined) {
      return callback(new PrivateTargetError(hostname, addresses[0]?.address ?? '?'), []);
    }
    if (options.all) callback(null, allowed);
    else callback(null, first.address, first.family);
  });
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
