import {
  passesCheck,
  verifiedEnvelopeDigest,
  type EnvelopeFields,
  type SignatureCheck,
  type SignatureVerifier,
} from '../crypto/index.js';

/**
 * Runs signature checks (identity proofs, Almanac attestations). Asynchronous so that the
 * checks can run off the event loop, in the verifier threads, without changing the callers.
 */
export interface SignatureChecker {
  /** True when the check passes; an absent check (malformed input) is `false`. */
  check(check: SignatureCheck | undefined): Promise<boolean>;
}

/** Checks on the calling thread. */
export function inlineSignatureChecker(verifier: SignatureVerifier): SignatureChecker {
  return { check: async (check) => passesCheck(verifier, check) };
}

/**
 * Checks that an envelope is signed by its sender, and yields its digest (the sha256 of
 * its signing bytes, see `envelopeDigest`) when it is; undefined when it is not. Asynchronous
 * so that verification can move off the event loop (worker threads) without changing its
 * callers.
 */
export interface EnvelopeVerifier {
  verify(envelope: EnvelopeFields): Promise<Uint8Array | undefined>;
}

/** Verifies on the calling thread. */
export function inlineEnvelopeVerifier(verifier: SignatureVerifier): EnvelopeVerifier {
  return { verify: async (envelope) => verifiedEnvelopeDigest(verifier, envelope) };
}
