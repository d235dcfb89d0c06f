import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256Hex } from '../crypto/index.js';

/**
 * API keys look like `agy_<id>_<secret>`: the id (12 lower-case base32 characters) finds the
 * row, the secret (32 random bytes, base64url) is checked against its stored SHA-256. A fast
 * hash is right here because the secret has 256 bits of entropy; nothing can be guessed.
 */
const KEY_PATTERN = /^agy_([a-z2-7]{12})_([A-Za-z0-9_-]{43})$/;
const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

export interface GeneratedKey {
  id: string;
  /** The full key to hand to the user once. */
  token: string;
  secretHash: string;
}

export function generateApiKey(): GeneratedKey {
  const id = Array.from(randomBytes(12), (b) => BASE32[b & 31]).join('');
  const secret = randomBytes(32).toString('base64url');
  return { id, token: `agy_${id}_${secret}`, secretHash: hashSecret(secret) };
}

export function hashSecret(secret: string): string {
  return sha256Hex(secret);
}

export function parseApiKey(token: string): { id: string; secret: string } | undefined {
  const match = KEY_PATTERN.exec(token);
  if (!match) return undefined;
  return { id: match[1]!, secret: match[2]! };
}

/** Compares a presented secret with a stored hash in constant time. */
export function secretMatches(secret: string, storedHash: string): boolean {
  const presented = Buffer.from(hashSecret(secret), 'hex');
  const stored = Buffer.from(storedHash, 'hex');
  return presented.length === stored.length && timingSafeEqual(presented, stored);
}
