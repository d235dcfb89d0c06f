import { bech32 } from '@scure/base';
import { CryptoFormatError } from './errors.js';

/**
 * BIP-173's 90-character limit does not apply: the Python `bech32` package uAgents uses does
 * not enforce it, and every 113-character signature exceeds it. This bound only keeps
 * garbage input cheap to reject.
 */
const MAX_BECH32_LENGTH = 1024;

/** BIP-173 allows only printable US-ASCII; the library checks the data part but not the prefix. */
const PRINTABLE_ASCII = /^[\x21-\x7e]*$/;

export interface DecodedBech32 {
  prefix: string;
  bytes: Uint8Array;
}

/**
 * Decodes BIP-173 bech32 (not bech32m). An all-upper-case string is accepted and its prefix
 * lower-cased; mixed case, a bad checksum, non-zero padding or, when given, another prefix
 * throw {@link CryptoFormatError}.
 */
export function decodeBech32(value: string, expectedPrefix?: string): DecodedBech32 {
  if (!PRINTABLE_ASCII.test(value)) {
    throw new CryptoFormatError('bech32 string contains characters outside printable ASCII');
  }
  let decoded: DecodedBech32;
  try {
    const { prefix, words } = bech32.decode(value as `${string}1${string}`, MAX_BECH32_LENGTH);
    decoded = { prefix, bytes: bech32.fromWords(words) };
  } catch (cause) {
    throw new CryptoFormatError(`invalid bech32 string: ${(cause as Error).message}`, { cause });
  }
  if (expectedPrefix !== undefined && decoded.prefix !== expectedPrefix) {
    throw new CryptoFormatError(
      `bech32 prefix is '${decoded.prefix}', expected '${expectedPrefix}'`,
    );
  }
  return decoded;
}

export function encodeBech32(prefix: string, bytes: Uint8Array): string {
  return bech32.encode(prefix, bech32.toWords(bytes), MAX_BECH32_LENGTH);
}
