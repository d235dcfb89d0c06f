import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  decodeSignature,
  isAgentAddress,
  verifyBech32Signature,
  verifyChallengeResponse,
  verifyEnvelopeSignature,
} from '../../src/crypto/index.js';
import { CURVE_ORDER, makeEnvelope, sValue, TestIdentity, type SHalf } from '../kit/uagent.js';
import { vectors } from '../kit/vectors.js';
import { verifiers } from '../kit/verifiers.js';

function isHighS(signature: string): boolean {
  return sValue(decodeSignature(signature)) > CURVE_ORDER / 2n;
}

describe('TestIdentity.fromSeed', () => {
  for (const vector of vectors.identities) {
    it(`derives the uagents-core key and address of seed "${vector.seed}" index ${vector.index}`, () => {
      const identity = TestIdentity.fromSeed(vector.seed, vector.index);
      assert.equal(Buffer.from(identity.privateKey).toString('hex'), vector.private_key_hex);
      assert.equal(Buffer.from(identity.publicKey).toString('hex'), vector.public_key_hex);
      assert.equal(identity.address, vector.address);
    });
  }

  it('defaults to index 0', () => {
    const seed = 'agentry test seed';
    assert.equal(TestIdentity.fromSeed(seed).address, TestIdentity.fromSeed(seed, 0).address);
    assert.notEqual(TestIdentity.fromSeed(seed).address, TestIdentity.fromSeed(seed, 1).address);
  });
});

describe('TestIdentity.random', () => {
  it('makes a fresh agent each time', () => {
    const first = TestIdentity.random();
    assert.equal(isAgentAddress(first.address), true);
    assert.notEqual(first.address, TestIdentity.random().address);
  });
});

describe('TestIdentity.sign', () => {
  const identity = TestIdentity.random();
  const message = Buffer.from('signed like a uAgent');

  for (const half of ['high', 'low'] as const satisfies readonly SHalf[]) {
    for (const verifier of verifiers) {
      it(`makes a ${half}-s signature that ${verifier.kind} accepts`, () => {
        const signature = identity.sign(message, { s: half });
        assert.equal(isHighS(signature), half === 'high');
        assert.equal(verifyBech32Signature(verifier, message, signature, identity.publicKey), true);
      });
    }
  }

  it('by default leaves s high about half the time, like Python’s ecdsa', () => {
    const halves = new Set(Array.from({ length: 64 }, () => isHighS(identity.sign(message))));
    assert.deepEqual(halves, new Set([true, false]));
  });
});

describe('TestIdentity proofs and envelopes', () => {
  const identity = TestIdentity.fromSeed('agentry vector seed alice');

  for (const verifier of verifiers) {
    it(`signs a challenge that verifyChallengeResponse accepts with ${verifier.kind}`, () => {
      const response = identity.signChallenge('f3a1c1d6-2b1e-4cbb-9a55-3c2a8c7e9d10');
      assert.equal(
        verifyChallengeResponse(
          verifier,
          identity.address,
          'f3a1c1d6-2b1e-4cbb-9a55-3c2a8c7e9d10',
          response,
        ),
        true,
      );
    });

    it(`signs an envelope that verifyEnvelopeSignature accepts with ${verifier.kind}`, () => {
      const envelope = makeEnvelope({
        sender: identity.address,
        target: TestIdentity.random().address,
        payloadJson: '{"text":"hello"}',
        expires: 1_790_003_600,
        nonce: 7,
      });
      assert.equal(verifyEnvelopeSignature(verifier, identity.signEnvelope(envelope)), true);
    });
  }
});

describe('makeEnvelope', () => {
  it('shapes an unsigned envelope like uAgents does', () => {
    const envelope = makeEnvelope({
      sender: 'agent1a',
      target: 'agent1b',
      payloadJson: '{"text":"é"}',
    });
    assert.equal(envelope.version, 1);
    assert.match(
      envelope.session,
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    assert.match(envelope.schema_digest, /^model:[0-9a-f]{64}$/);
    assert.equal(Buffer.from(envelope.payload ?? '', 'base64').toString('utf8'), '{"text":"é"}');
    assert.equal(envelope.expires, null);
    assert.equal(envelope.nonce, null);
    assert.equal('signature' in envelope, false);
  });
});
