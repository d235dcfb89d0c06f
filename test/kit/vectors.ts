import { readFileSync } from 'node:fs';
import type { EnvelopeFields } from '../../src/crypto/index.js';

/**
 * Vectors made by the real uagents-core Python code (see test/fixtures/README.md). Every test
 * of the crypto module replays all of them, valid and invalid.
 */
export interface UagentsVectors {
  about: string;
  identities: IdentityVector[];
  challenge_proofs: ChallengeProofVector[];
  attestations: AttestationVector[];
  envelopes: EnvelopeVector[];
  bech32: Bech32Vector[];
}

export interface IdentityVector {
  seed: string;
  index: number;
  private_key_hex: string;
  public_key_hex: string;
  address: string;
}

export interface ChallengeProofVector {
  address: string;
  challenge: string;
  challenge_response: string;
  valid: boolean;
  note: string;
}

export interface AttestationVector {
  address: string;
  attestation: string;
  valid_from?: number;
  valid_to?: number;
  verify_at: number;
  valid: boolean;
  note: string;
}

export interface EnvelopeVector {
  envelope: EnvelopeFields;
  valid: boolean;
  note: string;
}

export type Bech32Vector =
  | { string: string; prefix: string; hex: string; valid: true; note?: string }
  | { string: string; valid: false; note: string };

export const vectors = JSON.parse(
  readFileSync(new URL('../fixtures/uagents-crypto.json', import.meta.url), 'utf8'),
) as UagentsVectors;

/** The identity vector whose seed ends in `name`: alice, bob or carol. */
export function identityVector(name: string): IdentityVector {
  const found = vectors.identities.find((identity) => identity.seed.endsWith(` ${name}`));
  if (found === undefined) throw new Error(`no identity vector named ${name}`);
  return found;
}
