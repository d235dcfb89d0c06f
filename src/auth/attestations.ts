import {
  attestationTimeStatus,
  parseAttestation,
  verifyAttestation,
  type SignatureVerifier,
} from '../crypto/index.js';
import { UnauthenticatedError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import type { Principal } from './principal.js';

export interface AttestationPolicy {
  skewSeconds: number;
  maxWindowSeconds: number;
}

type AgentPrincipal = Extract<Principal, { kind: 'agent' }>;

interface VerifiedAttestation {
  validFrom: number;
  validTo: number;
  /** Handed, unchangeable, to every request that carries the attestation. */
  principal: AgentPrincipal;
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
   * Returns the agent principal of an attestation: 401 when it is malformed, badly signed or
   * outside its window. Whether that agent may act on what the request names is the auth
   * plugin's check, made once the request's addresses are canonical.
   */
  authenticate(attestation: string): AgentPrincipal {
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
    return known.principal;
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
    const { address, validFrom, validTo } = parsed;
    const principal = Object.freeze({ kind: 'agent' as const, address, validTo });
    const entry = { validFrom, validTo, principal };
    if (this.verified.size >= CACHE_LIMIT) {
      // Maps iterate in insertion order: drop the oldest entry.
      const oldest = this.verified.keys().next().value;
      if (oldest !== undefined) this.verified.delete(oldest);
    }
    this.verified.set(attestation, entry);
    return entry;
  }
}
