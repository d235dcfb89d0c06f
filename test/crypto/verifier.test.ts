import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  createDefaultVerifier,
  createNodeVerifier,
  decodeSignature,
  publicKeyFromAgentAddress,
} from '../../src/crypto/index.js';
import { CURVE_ORDER, sValue, TestIdentity } from '../kit/uagent.js';
import { vectors } from '../kit/vectors.js';
import { verifiers } from '../kit/verifiers.js';

const HALF_ORDER = CURVE_ORDER / 2n;

function scalarBytes(value: bigint): Buffer {
  return Buffer.from(value.toString(16).padStart(64, '0'), 'hex');
}

/** The same signature with s replaced by n − s, which is just as valid. */
function otherHalf(signature: Uint8Array): Buffer {
  return Buffer.concat([signature.subarray(0, 32), scalarBytes(CURVE_ORDER - sValue(signature))]);
}

/** A signature made by the Python client, and whose s is above n/2. */
const pythonHighS = (() => {
  const proof = vectors.challenge_proofs.find((vector) => vector.note === 'high s');
  assert.ok(proof, 'the vectors carry a high-s challenge proof');
  return {
    message: Buffer.from(proof.challenge, 'utf8'),
    signature: decodeSignature(proof.challenge_response),
    publicKey: publicKeyFromAgentAddress(proof.address),
  };
})();

for (const verifier of verifiers) {
  describe(`${verifier.kind} verifier`, () => {
    const { message, signature, publicKey } = pythonHighS;

    it('accepts the Python client’s high-s signature and its low-s twin', () => {
      assert.ok(sValue(signature) > HALF_ORDER);
      assert.equal(verifier.verify(message, signature, publicKey), true);
      assert.equal(verifier.verify(message, otherHalf(signature), publicKey), true);
    });

    it('leaves the caller’s signature bytes untouched while normalising s', () => {
      const copy = Buffer.from(signature);
      verifier.verify(message, copy, publicKey);
      assert.deepEqual(copy, Buffer.from(signature));
    });

    it('rejects the signature over another message or under another key', () => {
      assert.equal(verifier.verify(Buffer.from('other'), signature, publicKey), false);
      const stranger = TestIdentity.random();
      assert.equal(verifier.verify(message, signature, stranger.publicKey), false);
    });

    it('returns false, without throwing, for 63- and 65-byte signatures', () => {
      assert.equal(verifier.verify(message, signature.subarray(0, 63), publicKey), false);
      assert.equal(
        verifier.verify(message, Buffer.concat([signature, Uint8Array.of(0)]), publicKey),
        false,
      );
    });

    const r = signature.subarray(0, 32);
    const s = signature.subarray(32);
    const outOfRange: Record<string, Uint8Array> = {
      'r = 0': Buffer.concat([scalarBytes(0n), s]),
      's = 0': Buffer.concat([r, scalarBytes(0n)]),
      'r = n': Buffer.concat([scalarBytes(CURVE_ORDER), s]),
      's = n': Buffer.concat([r, scalarBytes(CURVE_ORDER)]),
      'all bits set': new Uint8Array(64).fill(0xff),
      'random bytes': randomBytes(64),
    };
    for (const [what, bad] of Object.entries(outOfRange)) {
      it(`returns false, without throwing, for a signature with ${what}`, () => {
        assert.equal(verifier.verify(message, bad, publicKey), false);
      });
    }

    it('returns false, without throwing, for a key that is not a compressed curve point', () => {
      // 5³ + 7 is not a square modulo p, so no point has x = 5.
      const notOnCurve = Buffer.concat([Uint8Array.of(2), scalarBytes(5n)]);
      assert.equal(verifier.verify(message, signature, notOnCurve), false);
      assert.equal(verifier.verify(message, signature, publicKey.subarray(0, 32)), false);
      assert.equal(
        verifier.verify(message, signature, Buffer.concat([publicKey, publicKey])),
        false,
      );
    });
  });
}

describe('createNodeVerifier', () => {
  it('keeps verifying correctly while its key cache evicts', () => {
    const verifier = createNodeVerifier({ maxCachedKeys: 1 });
    const signers = [TestIdentity.random(), TestIdentity.random(), TestIdentity.random()];
    const message = Buffer.from('eviction');
    for (let round = 0; round < 3; round++) {
      for (const signer of signers) {
        const signature = decodeSignature(signer.sign(message));
        assert.equal(verifier.verify(message, signature, signer.publicKey), true);
        assert.equal(verifier.verify(message, signature, TestIdentity.random().publicKey), false);
      }
    }
  });
});

describe('createDefaultVerifier', () => {
  it('picks libsecp256k1 when its native binding loads', () => {
    assert.equal(createDefaultVerifier().kind, 'libsecp256k1');
  });
});
