import { CryptoFormatError } from './errors.js';
import {
  agentAddressFromPublicKey,
  COMPRESSED_PUBLIC_KEY_LENGTH,
  decodeSignature,
} from './keys.js';
import type { SignatureVerifier } from './verifier.js';

const ATTESTATION_PREFIX = 'attr:';

/** PROTOCOL.md §4: public key (33) ‖ uint64be valid_from ‖ uint64be valid_to ‖ nonce (32). */
const VALID_FROM_OFFSET = COMPRESSED_PUBLIC_KEY_LENGTH;
const VALID_TO_OFFSET = VALID_FROM_OFFSET + 8;
const NONCE_OFFSET = VALID_TO_OFFSET + 8;
const PAYLOAD_LENGTH = NONCE_OFFSET + 32;

export interface ParsedAttestation {
  publicKey: Uint8Array;
  /** The agent the attestation speaks for; it must equal the address the request acts on. */
  address: string;
  /** Unix seconds. */
  validFrom: number;
  /** Unix seconds. */
  validTo: number;
  nonce: Uint8Array;
  /** The signed bytes. */
  payload: Uint8Array;
  signature: Uint8Array;
}

export type AttestationTimeStatus = 'valid' | 'not-yet-valid' | 'expired' | 'window-too-long';

/**
 * Parses `attr:<base64 payload>:<sig1…>`, the `Authorization: Agent` credential without its
 * scheme. Throws {@link CryptoFormatError} when any part is malformed; checks neither the
 * signature nor the time.
 */
export function parseAttestation(value: string): ParsedAttestation {
  if (!value.startsWith(ATTESTATION_PREFIX)) {
    throw new CryptoFormatError(`attestation must start with '${ATTESTATION_PREFIX}'`);
  }
  const body = value.slice(ATTESTATION_PREFIX.length);
  const separator = body.indexOf(':');
  if (separator === -1) {
    throw new CryptoFormatError('attestation has no signature part');
  }
  const payload = decodeCanonicalBase64(body.slice(0, separator));
  if (payload.length !== PAYLOAD_LENGTH) {
    throw new CryptoFormatError(
      `attestation payload must be ${PAYLOAD_LENGTH} bytes, got ${payload.length}`,
    );
  }
  const publicKey = payload.subarray(0, COMPRESSED_PUBLIC_KEY_LENGTH);
  const validFrom = readUnixSeconds(payload, VALID_FROM_OFFSET, 'valid_from');
  const validTo = readUnixSeconds(payload, VALID_TO_OFFSET, 'valid_to');
  if (validTo < validFrom) {
    throw new CryptoFormatError('attestation valid_to precedes valid_from');
  }
  return {
    publicKey,
    address: agentAddressFromPublicKey(publicKey),
    validFrom,
    validTo,
    nonce: payload.subarray(NONCE_OFFSET),
    payload,
    signature: decodeSignature(body.slice(separator + 1)),
  };
}

/** Clients send standard padded base64; anything that does not re-encode identically is refused. */
function decodeCanonicalBase64(text: string): Buffer {
  const bytes = Buffer.from(text, 'base64');
  if (bytes.toString('base64') !== text) {
    throw new CryptoFormatError('attestation payload is not canonical base64');
  }
  return bytes;
}

function readUnixSeconds(payload: Buffer, offset: number, field: string): number {
  const seconds = payload.readBigUInt64BE(offset);
  if (seconds > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new CryptoFormatError(`attestation ${field} exceeds Number.MAX_SAFE_INTEGER`);
  }
  return Number(seconds);
}

/** Whether the payload is signed by the key it carries; the caller still checks address and time. */
export function verifyAttestation(
  verifier: SignatureVerifier,
  attestation: ParsedAttestation,
): boolean {
  return verifier.verify(attestation.payload, attestation.signature, attestation.publicKey);
}

/**
 * Valid when `validFrom − skew ≤ now ≤ validTo + skew`. A window longer than
 * `maxWindowSeconds` is refused whatever the time: clients use 1000 s or 3600 s, and a long one
 * would be a replayable credential.
 */
export function attestationTimeStatus(
  attestation: Pick<ParsedAttestation, 'validFrom' | 'validTo'>,
  nowSeconds: number,
  skewSeconds: number,
  maxWindowSeconds: number,
): AttestationTimeStatus {
  if (attestation.validTo - attestation.validFrom > maxWindowSeconds) return 'window-too-long';
  if (nowSeconds < attestation.validFrom - skewSeconds) return 'not-yet-valid';
  if (nowSeconds > attestation.validTo + skewSeconds) return 'expired';
  return 'valid';
}
