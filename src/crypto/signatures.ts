import { unlessMalformed } from './errors.js';
import { decodeSignature, signerKeyFromAgentAddress } from './keys.js';
import type { SignatureVerifier } from './verifier.js';

/** One signature to check: the bytes signed, the 64-byte signature, the signer's 33-byte key. */
export interface SignatureCheck {
  message: Uint8Array;
  signature: Uint8Array;
  publicKey: Uint8Array;
}

/** Runs a check; an absent one (its input was malformed) is `false`. */
export function passesCheck(
  verifier: SignatureVerifier,
  check: SignatureCheck | undefined,
): boolean {
  return check !== undefined && verifier.verify(check.message, check.signature, check.publicKey);
}

/** The check of a `sig1…` string over `message`; undefined when the string is malformed. */
export function bech32SignatureCheck(
  message: Uint8Array,
  signature: string,
  publicKey: Uint8Array,
): SignatureCheck | undefined {
  const signatureBytes = unlessMalformed(() => decodeSignature(signature));
  return signatureBytes === undefined
    ? undefined
    : { message, signature: signatureBytes, publicKey };
}

/** Verifies a `sig1…` string over `message`; a malformed signature string is `false`. */
export function verifyBech32Signature(
  verifier: SignatureVerifier,
  message: Uint8Array,
  signature: string,
  publicKey: Uint8Array,
): boolean {
  return passesCheck(verifier, bech32SignatureCheck(message, signature, publicKey));
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
  return passesCheck(verifier, challengeResponseCheck(address, challenge, challengeResponse));
}

/** The check {@link verifyChallengeResponse} runs; undefined when an input is malformed. */
export function challengeResponseCheck(
  address: string,
  challenge: string,
  challengeResponse: string,
): SignatureCheck | undefined {
  const publicKey = unlessMalformed(() => signerKeyFromAgentAddress(address));
  return publicKey === undefined
    ? undefined
    : bech32SignatureCheck(Buffer.from(challenge, 'utf8'), challengeResponse, publicKey);
}
