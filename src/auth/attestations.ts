import {
  attestationTimeStatus,
  parseAttestation,
  verifyAttestation,
  type SignatureVerifier,
} from '../crypto/index.js';
import { ForbiddenError, UnauthenticatedError } from '../errors.js';
import type { Clock } from '../services/clock.js';
import type { Principal } from './principal.js';

export interface AttestationPolicy {
  skewSeconds: number;
  maxWindowSeconds: number;
}

interface VerifiedAttestation {
  address: string;
  validFrom: number;
  validTo: number;
}

const CACHE_LIMIT = 10_000;

/**
 * Turns `Authorization: Agent attr:…` into an agent principal. Clients re-send one
 * attestation on every request for up to ~1000 s, so a verified attestation is remembered
 * (by its exact text) and later requests pay only the time check.
 */
export class AttestationAuthenticator {
  private readonly verified = new Map<string, VerifiedAttestation>();

  constructor(
    private readonly verifier: SignatureVerifier,
    private readonly clock: Clock,
    private readonly policy: AttestationPolicy,
  ) {}

  /**
   * Returns the agent principal for an attestation acting on `targetAddress`: 401 when the
   * attestation is malformed, badly signed or outside its window, 403 when it is valid but
   * belongs to another agent.
   */
  authenticate(attestation: string, targetAddress: string): Extract<Principal, { kind: 'agent' }> {
    const known = this.verified.get(attestation) ?? this.verifyFresh(attestation);
    const nowSeconds = Math.floor(this.clock.now() / 1000);
    const { skewSeconds } = this.policy;
    if (nowSeconds < known.validFrom - skewSeconds) {
      throw new UnauthenticatedError('Agent attestation is not valid yet', 'Agent');
    }
    if (nowSeconds > known.validTo + skewSeconds) {
      this.verified.delete(attestation);
      throw new UnauthenticatedError('Agent attestation has expired', 'Agent');
    }
    if (known.address !== targetAddress) {
      throw new ForbiddenError('Agent attestation does not belong to the requested agent');
    }
    return { kind: 'agent', address: known.address, validTo: known.validTo };
  }

  private verifyFresh(attestation: string): VerifiedAttestation {
    let parsed;
    try {
      parsed = parseAttestation(attestation);
    } catch {
      throw new UnauthenticatedError('Malformed agent attestation', 'Agent');
    }
    const window = attestationTimeStatus(
      parsed,
      Math.floor(this.clock.now() / 1000),
      this.policy.skewSeconds,
      this.policy.maxWindowSeconds,
    );
    if (window === 'window-too-long') {
      throw new UnauthenticatedError(
        `Agent attestation window is longer than ${this.policy.maxWindowSeconds} s`,
        'Agent',
      );
    }
    if (!verifyAttestation(this.verifier, parsed)) {
      throw new UnauthenticatedError('Invalid agent attestation signature', 'Agent');
    }
    const entry = { address: parsed.address, validFrom: parsed.validFrom, validTo: parsed.validTo };
    if (this.verified.size >= CACHE_LIMIT) {
      // Maps iterate in insertion order: drop the oldest entry.
      const oldest = this.verified.keys().next().value;
      if (oldest !== undefined) this.verified.delete(oldest);
    }
    this.verified.set(attestation, entry);
    return entry;
  }
}
