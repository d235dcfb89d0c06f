import { createECDH, createHash } from 'node:crypto';
import { decodeBech32, encodeBech32 } from './bech32.js';
import { CryptoFormatError, unlessMalformed } from './errors.js';
import { isCompressedCurvePoint } from './secp256k1.js';

const AGENT_PREFIX = 'agent';
const USER_PREFIX = 'user';
const SIGNATURE_PREFIX = 'sig';
export const COMPRESSED_PUBLIC_KEY_LENGTH = 33;
export const SIGNATURE_LENGTH = 64;
const USER_ADDRESS_LENGTH = 32;

function assertCompressedKeyShape(bytes: Uint8Array): void {
  if (bytes.length !== COMPRESSED_PUBLIC_KEY_LENGTH) {
    throw new CryptoFormatError(
      `public key must be ${COMPRESSED_PUBLIC_KEY_LENGTH} bytes, got ${bytes.length}`,
    );
  }
  if (bytes[0] !== 0x02 && bytes[0] !== 0x03) {
    throw new CryptoFormatError('public key must be a compressed point (0x02 or 0x03 first)');
  }
}

function assertCompressedPublicKey(bytes: Uint8Array): void {
  assertCompressedKeyShape(bytes);
  if (!isCompressedCurvePoint(bytes)) {
    throw new CryptoFormatError('public key is not a point on secp256k1');
  }
}

/** `agent1…`: bech32 of the 33-byte compressed public key. */
export function agentAddressFromPublicKey(publicKey: Uint8Array): string {
  assertCompressedPublicKey(publicKey);
  return encodeBech32(AGENT_PREFIX, publicKey);
}

/**
 * The private key uAgents' `Identity.from_seed(seed, index)` derives:
 * SHA-256(SHA-256("agent" ‖ index byte) ‖ SHA-256(seed as UTF-8)).
 */
export function privateKeyFromSeed(seed: string, index = 0): Uint8Array {
  if (!Number.isInteger(index) || index < 0 || index > 255) {
    throw new CryptoFormatError(`key index must be a byte, got ${index}`);
  }
  const derivation = createHash('sha256')
    .update(AGENT_PREFIX, 'utf8')
    .update(Uint8Array.of(index))
    .digest();
  const seedHash = createHash('sha256').update(seed, 'utf8').digest();
  return createHash('sha256').update(derivation).update(seedHash).digest();
}

/** The `agent1…` address of `Identity.from_seed(seed, index)`. */
export function agentAddressFromSeed(seed: string, index = 0): string {
  const ecdh = createECDH('secp256k1');
  ecdh.setPrivateKey(privateKeyFromSeed(seed, index));
  return agentAddressFromPublicKey(ecdh.getPublicKey(null, 'compressed'));
}

/**
 * Agent addresses already decoded to a key on the curve, with that key. A request names the
 * same agent several times (the path, the attestation, the signed body), each a bech32 decode
 * and a curve check; the agents a service hears from are few and come again. Bounded, the
 * oldest forgotten first.
 */
const checkedKeys = new Map<string, Uint8Array>();
const CHECKED_KEYS = 10_000;

/** The compressed public key an agent address carries; throws {@link CryptoFormatError}. */
export function publicKeyFromAgentAddress(address: string): Uint8Array {
  const known = checkedKeys.get(address);
  if (known) return known.slice();
  const { bytes } = decodeBech32(address, AGENT_PREFIX);
  assertCompressedPublicKey(bytes);
  if (checkedKeys.size >= CHECKED_KEYS) checkedKeys.delete(checkedKeys.keys().next().value!);
  checkedKeys.set(address, bytes.slice());
  return bytes;
}

/**
 * The key bytes of an agent address, checked for shape but not for being on the curve: for
 * signature checks only, where the verifier rejects such a key anyway, and skipping the
 * curve test keeps it off the per-message path.
 */
export function signerKeyFromAgentAddress(address: string): Uint8Array {
  const known = checkedKeys.get(address);
  if (known) return known.slice();
  const { bytes } = decodeBech32(address, AGENT_PREFIX);
  assertCompressedKeyShape(bytes);
  return bytes;
}

/**
 * True for any string that decodes to an agent key, upper-case spellings included: compare
 * addresses after {@link agentAddressFromPublicKey}(publicKeyFromAgentAddress(s)) if the
 * canonical lower-case form matters.
 */
export function isAgentAddress(value: string): boolean {
  return unlessMalformed(() => publicKeyFromAgentAddress(value)) !== undefined;
}

/**
 * The `user1…` address a user of this service sends from: 32 bytes derived from the user's
 * id, so that it needs no storage and names exactly one user. It proves nothing by itself;
 * only that user's API key vouches for it.
 */
export function userAddressOf(userId: string): string {
  const bytes = createHash('sha256').update(`agentry user address ${userId}`, 'utf8').digest();
  return encodeBech32(USER_PREFIX, bytes);
}

/** `user1…` carries 32 random bytes: it names a user but proves nothing. */
export function isUserAddress(value: string): boolean {
  const decoded = unlessMalformed(() => decodeBech32(value, USER_PREFIX));
  return decoded?.bytes.length === USER_ADDRESS_LENGTH;
}

function assertSignatureLength(bytes: Uint8Array): void {
  if (bytes.length !== SIGNATURE_LENGTH) {
    throw new CryptoFormatError(`signature must be ${SIGNATURE_LENGTH} bytes, got ${bytes.length}`);
  }
}

/** `sig1…` → the 64 bytes r‖s; throws {@link CryptoFormatError} for anything else. */
export function decodeSignature(signature: string): Uint8Array {
  const { bytes } = decodeBech32(signature, SIGNATURE_PREFIX);
  assertSignatureLength(bytes);
  return bytes;
}

/** r‖s (64 bytes) → `sig1…`. */
export function encodeSignature(signature: Uint8Array): string {
  assertSignatureLength(signature);
  return encodeBech32(SIGNATURE_PREFIX, signature);
}
