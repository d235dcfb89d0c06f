import { createHash, verify, type KeyObject } from 'node:crypto';
import { COMPRESSED_PUBLIC_KEY_LENGTH, SIGNATURE_LENGTH } from './keys.js';
import { nativeSecp256k1, nodePublicKey } from './secp256k1.js';

/**
 * Verifies plain ECDSA-SHA256 over secp256k1 (PROTOCOL.md §3). High-s signatures are
 * accepted because the Python `ecdsa` signer leaves s above n/2 about half the time. Never
 * throws: a wrong-length, out-of-range or otherwise unusable signature or key is `false`.
 */
export interface SignatureVerifier {
  readonly kind: 'libsecp256k1' | 'node:crypto';
  verify(message: Uint8Array, signature64: Uint8Array, publicKey33: Uint8Array): boolean;
}

function hasProtocolLengths(signature: Uint8Array, publicKey: Uint8Array): boolean {
  return signature.length === SIGNATURE_LENGTH && publicKey.length === COMPRESSED_PUBLIC_KEY_LENGTH;
}

/** libsecp256k1 through its N-API binding (~5× node:crypto); throws when it cannot load. */
export function createNativeVerifier(): SignatureVerifier {
  const secp256k1 = nativeSecp256k1();
  if (!secp256k1) throw new Error('the libsecp256k1 binding (secp256k1/bindings) did not load');
  return {
    kind: 'libsecp256k1',
    verify(message, signature, publicKey) {
      if (!hasProtocolLengths(signature, publicKey)) return false;
      const digest = createHash('sha256').update(message).digest();
      try {
        // signatureNormalize rewrites its argument in place: never hand it the caller's bytes.
        const lowS = secp256k1.signatureNormalize(Uint8Array.from(signature));
        return secp256k1.ecdsaVerify(lowS, digest, publicKey);
      } catch {
        // The binding throws for r or s ≥ n and for keys that do not parse.
        return false;
      }
    },
  };
}

const DEFAULT_CACHED_KEYS = 4096;

/**
 * node:crypto (OpenSSL), which accepts high s as is. Importing a key costs ~124 µs, more than
 * a third of a verify, and agents re-sign with the same key all day, so the most recently
 * used KeyObjects are kept.
 */
export function createNodeVerifier(options: { maxCachedKeys?: number } = {}): SignatureVerifier {
  const maxCachedKeys = options.maxCachedKeys ?? DEFAULT_CACHED_KEYS;
  const keys = new Map<string, KeyObject>();

  function keyObjectFor(publicKey: Uint8Array): KeyObject {
    const id = Buffer.from(publicKey).toString('latin1');
    let key = keys.get(id);
    if (key === undefined) {
      key = nodePublicKey(publicKey);
      if (keys.size >= maxCachedKeys) {
        // Map iteration is insertion order, so the first key is the least recently used.
        keys.delete(keys.keys().next().value as string);
      }
    } else {
      keys.delete(id);
    }
    keys.set(id, key);
    return key;
  }

  return {
    kind: 'node:crypto',
    verify(message, signature, publicKey) {
      // OpenSSL reads a 63- or 65-byte P1363 signature as merely invalid: check lengths first.
      if (!hasProtocolLengths(signature, publicKey)) return false;
      try {
        const key = keyObjectFor(publicKey);
        return verify('sha256', message, { key, dsaEncoding: 'ieee-p1363' }, signature);
      } catch {
        // The import throws for a point that is not on the curve.
        return false;
      }
    },
  };
}

/** The native verifier when its binding loads, node:crypto otherwise; log `kind` at start. */
export function createDefaultVerifier(): SignatureVerifier {
  try {
    return createNativeVerifier();
  } catch {
    return createNodeVerifier();
  }
}
