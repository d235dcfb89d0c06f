import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  encodeBech32,
  publicKeyFromAgentAddress,
  verifyBech32Signature,
  verifyChallengeResponse,
} from '../../src/crypto/index.js';
import { TestIdentity } from '../kit/uagent.js';
import { identityVector, vectors } from '../kit/vectors.js';
import { verifiers } from '../kit/verifiers.js';

for (const verifier of verifiers) {
  describe(`challenge proof vectors with ${verifier.kind}`, () => {
    for (const proof of vectors.challenge_proofs) {
      const verb = proof.valid ? 'accepts' : 'rejects';
      it(`${verb} a challenge response: ${proof.note}`, () => {
        assert.equal(
          verifyChallengeResponse(
            verifier,
            proof.address,
            proof.challenge,
            proof.challenge_response,
          ),
          proof.valid,
        );
      });
    }

    it('rejects a proof for a malformed, off-curve or user address instead of throwing', () => {
      const identity = TestIdentity.random();
      const response = identity.signChallenge('challenge');
      assert.equal(
        verifyChallengeResponse(verifier, identity.address, 'challenge', response),
        true,
      );
      assert.equal(verifyChallengeResponse(verifier, 'agent1nope', 'challenge', response), false);
      // 5³ + 7 is not a square modulo p, so no point has x = 5.
      const offCurve = encodeBech32('agent', Buffer.from(`02${'5'.padStart(64, '0')}`, 'hex'));
      assert.equal(verifyChallengeResponse(verifier, offCurve, 'challenge', response), false);
      const userAddress = encodeBech32('user', identity.publicKey.subarray(1));
      assert.equal(verifyChallengeResponse(verifier, userAddress, 'challenge', response), false);
    });
  });

  describe(`verifyBech32Signature with ${verifier.kind}`, () => {
    const publicKey = publicKeyFromAgentAddress(identityVector('alice').address);
    const message = Buffer.from('message');

    it('returns false, without throwing, for strings that are not sig1 signatures', () => {
      for (const signature of ['', 'sig1', 'not a signature', identityVector('alice').address]) {
        assert.equal(verifyBech32Signature(verifier, message, signature, publicKey), false);
      }
    });
  });
}
