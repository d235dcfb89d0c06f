import { createDefaultVerifier, verifyEnvelopeSignature } from '../../src/crypto/index.js';
import type { EnvelopeFields } from '../../src/crypto/index.js';
import type { Measure } from '../lib/report.js';
import { medianRepeat, repeatFor, type Rounds } from '../lib/repeat.js';

/**
 * Envelope signature checks per second on one core with the verifier the service picks,
 * each the whole check a submit pays: sender address and signature decoding, signing bytes,
 * SHA-256, s normalisation and ECDSA verification.
 */
export function measureCryptoCeiling(envelopes: EnvelopeFields[], rounds: Rounds): Measure {
  const verifier = createDefaultVerifier();
  let next = 0;
  const verifyNext = (): void => {
    const envelope = envelopes[next++ % envelopes.length]!;
    if (!verifyEnvelopeSignature(verifier, envelope)) {
      throw new Error('a correctly signed envelope did not verify');
    }
  };
  repeatFor(0.5, verifyNext);
  const run = medianRepeat(rounds, verifyNext);
  return {
    id: 'ceiling.crypto',
    label: `crypto ceiling: envelope signature check (${verifier.kind})`,
    value: run.perCore,
    unit: 'checks/s/core',
    details: {
      verifier: verifier.kind,
      verifications: run.calls,
      distinctEnvelopes: envelopes.length,
      preempted: run.preempted,
      roundRates: run.roundRates,
    },
  };
}
