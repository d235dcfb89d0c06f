import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  attestationTimeStatus,
  CryptoFormatError,
  parseAttestation,
  verifyAttestation,
  type AttestationTimeStatus,
  type SignatureVerifier,
} from '../../src/crypto/index.js';
import { TestIdentity } from '../kit/uagent.js';
import { vectors, type AttestationVector } from '../kit/vectors.js';
import { verifiers } from '../kit/verifiers.js';

const MAX_WINDOW_SECONDS = 24 * 3600;

type Verdict =
  | 'accepted'
  | 'malformed'
  | 'bad signature'
  | "another agent's attestation"
  | Exclude<AttestationTimeStatus, 'valid'>;

/**
 * The checks a server makes, in order. The vectors' "expired" case is one second past
 * valid_to, so they are replayed without clock skew: any skew would let it through.
 */
function verdict(verifier: SignatureVerifier, vector: AttestationVector): Verdict {
  let attestation;
  try {
    attestation = parseAttestation(vector.attestation);
  } catch (error) {
    assert.ok(error instanceof CryptoFormatError);
    return 'malformed';
  }
  if (!verifyAttestation(verifier, attestation)) return 'bad signature';
  if (attestation.address !== vector.address) return "another agent's attestation";
  const status = attestationTimeStatus(attestation, vector.verify_at, 0, MAX_WINDOW_SECONDS);
  return status === 'valid' ? 'accepted' : status;
}

/** Why each invalid vector must fail: a new vector needs a line here. */
const expectedRejections: Record<string, Verdict> = {
  expired: 'expired',
  'not yet valid': 'not-yet-valid',
  'validity window edited after signing': 'bad signature',
  "attestation of alice presented for bob's mailbox: the public key in the payload is not bob's":
    "another agent's attestation",
  'signature part missing': 'malformed',
  'payload of 80 bytes instead of 81': 'malformed',
};

for (const verifier of verifiers) {
  describe(`attestation vectors with ${verifier.kind}`, () => {
    for (const vector of vectors.attestations) {
      const expected = vector.valid ? 'accepted' : expectedRejections[vector.note];
      const behaviour = vector.valid ? 'accepts' : `rejects as ${expected ?? 'unclassified'}`;
      it(`${behaviour}: ${vector.note}`, () => {
        assert.ok(expected, `classify the new vector "${vector.note}" in expectedRejections`);
        assert.equal(verdict(verifier, vector), expected);
      });
    }
  });
}

describe('parseAttestation', () => {
  const first = vectors.attestations.find((vector) => vector.valid);
  assert.ok(first);
  const separator = first.attestation.lastIndexOf(':');
  const payload = first.attestation.slice('attr:'.length, separator);
  const signature = first.attestation.slice(separator + 1);

  it('reads key, address, window and nonce from the 81-byte payload', () => {
    const attestation = parseAttestation(first.attestation);
    assert.equal(attestation.address, first.address);
    assert.equal(attestation.validFrom, first.valid_from);
    assert.equal(attestation.validTo, first.valid_to);
    assert.deepEqual(
      [...attestation.nonce],
      Array.from({ length: 32 }, (_, i) => i),
    );
    assert.equal(attestation.payload.length, 81);
    assert.equal(attestation.signature.length, 64);
  });

  it('notices a window edited after signing to last more than a day', () => {
    const edited = vectors.attestations.find(
      (v) => v.note === 'validity window edited after signing',
    );
    assert.ok(edited);
    const attestation = parseAttestation(edited.attestation);
    assert.equal(
      attestationTimeStatus(attestation, edited.verify_at, 0, MAX_WINDOW_SECONDS),
      'window-too-long',
    );
  });

  const malformed: Record<string, string> = {
    'the Agent scheme still in front': `Agent ${first.attestation}`,
    'another prefix': `attest:${payload}:${signature}`,
    'URL-safe base64': `attr:${payload.replaceAll('+', '-').replaceAll('/', '_')}:${signature}`,
    'whitespace inside the base64': `attr:${payload.slice(0, 20)} ${payload.slice(20)}:${signature}`,
    'a third part': `${first.attestation}:extra`,
    'an empty signature': `attr:${payload}:`,
    'a signature that is not bech32': `attr:${payload}:${signature.slice(0, -1)}x`,
  };
  for (const [what, value] of Object.entries(malformed)) {
    it(`rejects an attestation with ${what}`, () => {
      assert.throws(() => parseAttestation(value), CryptoFormatError);
    });
  }

  it('rejects a payload whose key is not a curve point', () => {
    const bytes = Buffer.from(payload, 'base64');
    bytes.fill(0, 1, 33);
    assert.throws(() => parseAttestation(`attr:${bytes.toString('base64')}:${signature}`), /point/);
  });

  it('rejects times beyond Number.MAX_SAFE_INTEGER and windows that end before they start', () => {
    const identity = TestIdentity.random();
    assert.throws(
      () => parseAttestation(identity.attestation({ validFrom: 0, validTo: 2 ** 53 })),
      /valid_to exceeds Number.MAX_SAFE_INTEGER/,
    );
    assert.throws(
      () => parseAttestation(identity.attestation({ validFrom: 1000, validTo: 999 })),
      /precedes/,
    );
  });
});

describe('attestationTimeStatus', () => {
  const window = { validFrom: 1_790_000_000, validTo: 1_790_001_000 };
  const skew = 30;
  const cases: [string, number, AttestationTimeStatus][] = [
    ['valid_from − skew − 1 s', window.validFrom - skew - 1, 'not-yet-valid'],
    ['valid_from − skew', window.validFrom - skew, 'valid'],
    ['valid_from', window.validFrom, 'valid'],
    ['valid_to', window.validTo, 'valid'],
    ['valid_to + skew', window.validTo + skew, 'valid'],
    ['valid_to + skew + 1 s', window.validTo + skew + 1, 'expired'],
  ];
  for (const [moment, now, status] of cases) {
    it(`is ${status} at ${moment} (skew ${skew} s)`, () => {
      assert.equal(attestationTimeStatus(window, now, skew, MAX_WINDOW_SECONDS), status);
    });
  }

  it('refuses a window one second longer than the maximum, even inside it', () => {
    const longest = { validFrom: 0, validTo: MAX_WINDOW_SECONDS };
    assert.equal(attestationTimeStatus(longest, 10, 0, MAX_WINDOW_SECONDS), 'valid');
    const tooLong = { validFrom: 0, validTo: MAX_WINDOW_SECONDS + 1 };
    assert.equal(attestationTimeStatus(tooLong, 10, 0, MAX_WINDOW_SECONDS), 'window-too-long');
  });
});

describe('attestations made by the test client', () => {
  for (const verifier of verifiers) {
    it(`verify with ${verifier.kind} and carry the given window and nonce`, () => {
      const identity = TestIdentity.random();
      const nonce = randomBytes(32);
      const attestation = parseAttestation(
        identity.attestation({ validFrom: 1_790_000_000, validTo: 1_790_003_600, nonce }),
      );
      assert.equal(verifyAttestation(verifier, attestation), true);
      assert.equal(attestation.address, identity.address);
      assert.equal(attestation.validTo - attestation.validFrom, 3600);
      assert.deepEqual(Buffer.from(attestation.nonce), nonce);
    });
  }
});
