import { BlockList, isIP } from 'node:net';
import { parseProxyEntry } from '../config/proxy-entries.js';

/**
 * The reverse proxies whose forwarding headers are believed (`AGENTRY_TRUSTED_PROXIES`): each
 * entry an address (`10.0.0.5`, `::1`) or a range in CIDR notation (`172.28.0.0/24`). An
 * IPv4 address seen as IPv4-mapped IPv6 (`::ffff:10.0.0.5`, as a dual-stack socket reports
 * it) matches its IPv4 entry.
 */
export class TrustedProxies {
  private readonly list = new BlockList();

  constructor(readonly entries: readonly string[]) {
    for (const entry of entries) {
      const parsed = parseProxyEntry(entry);
      if (typeof parsed === 'string') throw new Error(parsed);
      this.list.addSubnet(parsed.address, parsed.prefix, parsed.family);
    }
  }

  /** Whether no proxy is trusted: the socket's address is the client's. */
  get none(): boolean {
    return this.entries.length === 0;
  }

  /** Whether `address` (as a socket reports it) is one of the trusted proxies. */
  trusts(address: string | undefined): boolean {
    if (!address || this.entries.length === 0) return false;
    const family = isIP(address);
    if (family === 0) return false;
    return this.list.check(address, family === 4 ? 'ipv4' : 'ipv6');
  }
}

/**
 * The `for=` nodes of an RFC 7239 `Forwarded` header, in order, as `X-Forwarded-For` lists
 * them: quotes, IPv6 brackets and ports are removed; obfuscated or unknown nodes
 * (`_hidden`, `unknown`) are kept as they are (never an address, so never trusted).
 */
export function forwardedFor(header: string): string[] {
  const nodes: string[] = [];
  for (const element of header.split(',')) {
    for (const pair of element.split(';')) {
      const eq = pair.indexOf('=');
      if (eq < 0 || pair.slice(0, eq).trim().toLowerCase() !== 'for') continue;
      let value = pair.slice(eq + 1).trim();
      if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) {
        value = value.slice(1, -1);
      }
      if (value.startsWith('[')) {
        const end = value.indexOf(']');
        value = end > 0 ? value.slice(1, end) : value;
      } else if (value.split(':').length === 2) {
        value = value.slice(0, value.indexOf(':'));
      }
      nodes.push(value);
    }
  }
  return nodes;
}
