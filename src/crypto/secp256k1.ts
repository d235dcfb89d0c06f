import { createPublicKey, type KeyObject } from 'node:crypto';
import { createRequire } from 'node:module';
import type * as Secp256k1 from 'secp256k1';

export type NativeSecp256k1 = typeof Secp256k1;

let native: NativeSecp256k1 | null | undefined;

/**
 * libsecp256k1's N-API binding, or null when it cannot load here. Loads
 * `secp256k1/bindings` rather than `secp256k1`, whose entry point silently falls back to a
 * pure-JS implementation 28× slower.
 */
export function nativeSecp256k1(): NativeSecp256k1 | null {
  if (native === undefined) {
    try {
      native = createRequire(import.meta.url)('secp256k1/bindings') as NativeSecp256k1;
    } catch {
      native = null;
    }
  }
  return native;
}

/** SPKI DER header for an id-ecPublicKey on secp256k1 followed by a 33-byte compressed point. */
const SECP256K1_SPKI_PREFIX = Buffer.from('3036301006072a8648ce3d020106052b8104000a032200', 'hex');

/** Imports a compressed point into node:crypto; throws for a point not on the curve. */
export function nodePublicKey(publicKey33: Uint8Array): KeyObject {
  return createPublicKey({
    key: Buffer.concat([SECP256K1_SPKI_PREFIX, publicKey33]),
    format: 'der',
    type: 'spki',
  });
}

/** Whether 33 bytes are a compressed point on secp256k1 (~4 µs native, ~120 µs otherwise). */
export function isCompressedCurvePoint(publicKey33: Uint8Array): boolean {
  const binding = nativeSecp256k1();
  if (binding) return binding.publicKeyVerify(publicKey33);
  try {
    nodePublicKey(publicKey33);
    return true;
  } catch {
    return false;
  }
}
