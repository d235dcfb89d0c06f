import { isIP } from 'node:net';

/**
 * The entries of `AGENTRY_TRUSTED_PROXIES` (docs/operations.md): checked here when the setting is
 * read, and made into the list of trusted proxies by infra/trusted-proxies.ts.
 */

/**
 * One entry of the setting (an address or a CIDR range), as the address, prefix length and family it stands for, or a
 * sentence saying what is wrong with it.
 */
export function parseProxyEntry(
  entry: string,
): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | string {
  const [address = '', prefixText, extra] = entry.trim().split('/');
  const version = isIP(address);
  if (version === 0 || extra !== undefined) {
    return `"${entry}" is neither an IP address nor a CIDR range such as 10.0.0.0/8 or fd00::/8`;
  }
  const bits = version === 4 ? 32 : 128;
  const family = version === 4 ? 'ipv4' : 'ipv6';
  if (prefixText === undefined) return { address, prefix: bits, family };
  const prefix = /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
  if (!(prefix >= 0 && prefix <= bits)) {
    return `"${entry}" has a prefix length that is not between 0 and ${bits}`;
  }
  return { address, prefix, family };
}
