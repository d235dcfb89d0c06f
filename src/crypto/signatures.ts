import { unlessMalformed } from './errors.js';
import { decodeSignature, signerKeyFromAgentAddress } from './keys.js';
import type { SignatureVerifier } from './verifier.js';

/** Verifies a `sig1…` string over `message`; a malformed signature string is `false`. */
export function verifyBech32Signature(
  verifier: SignatureVerifier,
  message: Uint8Array,
  signature: string,
  publicKey: Uint8Array,
): boolean {
  const signatureBytes = unlessMalformed(() => decodeSignature(signature));
  return signatureBytes !== undefined && verifier.verify(message, signatureBytes, publicKey);
}

/**
 * Identity proof (PROTOCOL.md §3): `challengeResponse` signs utf8(challenge) with the key of
 * `address`. A malformed address or signature is `false`.
 */
export function verifyChallengeResponse(
  verifier: SignatureVerifier,
  address: string,
  challenge: string,
  challengeResponse: string,
): boolean {
  const publicKey = unlessMalformed(() => signerKeyFromAgentAddress(address));
  return (
    publicKey !== undefined &&
    verifyBech32Signature(verifier, Buffer.from(challenge, 'utf8'), challengeResponse, publicKey)
  );
}
