import { passesCheck, type SignatureCheck, type SignatureVerifier } from '../crypto/index.js';

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
