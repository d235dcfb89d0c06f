import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  challengeResponseCheck,
  decodeSignature,
  envelopeDigest,
  type EnvelopeFields,
} from '../../src/crypto/index.js';
import { VerifierPool } from '../../src/infra/verifier-pool.js';
import { CURVE_ORDER, makeEnvelope, sValue, TestIdentity } from '../kit/uagent.js';
import { verifiers } from '../kit/verifiers.js';

const hex = (digest: Uint8Array | undefined): string | undefined =>
  digest && Buffer.from(digest).toString('hex');

const sender = TestIdentity.random();
const target = TestIdentity.random();

function signed(fields: { nonce: number; s?: 'high' | 'low' }): EnvelopeFields {
  return sender.signEnvelope(
    makeEnvelope({
      sender: sender.address,
      target: target.address,
      payloadJson: `{"n":${fields.nonce}}`,
      nonce: fields.nonce,
    }),
    { s: fields.s },
  );
}

for (const { kind } of verifiers) {
  describe(`verifier pool (${kind})`, () => {
    let pool: VerifierPool;
    before(() => {
      pool = new VerifierPool(2, kind);
    });
    after(() => pool.close());

    for (const s of ['high', 'low'] as const) {
      it(`accepts a ${s}-s signature and yields the envelope's digest`, async () => {
        const envelope = signed({ nonce: 1, s });
        const high = sValue(decodeSignature(envelope.signature!)) > CURVE_ORDER / 2n;
        assert.equal(high, s === 'high');
        assert.equal(hex(await pool.verify(envelope)), hex(envelopeDigest(envelope)));
      });
    }

    it('refuses a tampered, a foreign and an unsigned envelope', async () => {
      const good = signed({ nonce: 2 });
      const other = TestIdentity.random();
      const answers = await Promise.all([
        pool.verify({ ...good, payload: Buffer.from('{"n":3}').toString('base64') }),
        pool.verify({ ...good, nonce: 3 }),
        pool.verify({ ...good, sender: other.address }),
        pool.verify({ ...good, signature: null }),
        pool.verify({ ...good, signature: 'sig1notasignature' }),
      ]);
      assert.deepEqual(answers, [undefined, undefined, undefined, undefined, undefined]);
    });

    it('runs prepared checks (identity proofs) beside envelope checks, each with its verdict', async () => {
      const envelope = signed({ nonce: 9 });
      const proof = (challenge: string, s: 'high' | 'low') =>
        challengeResponseCheck(sender.address, challenge, sender.signChallenge(challenge, { s }));
      const [digest, high, low, wrongChallenge, wrongKey, malformed] = await Promise.all([
        pool.verify(envelope),
        pool.check(proof('first', 'high')),
        pool.check(proof('second', 'low')),
        pool.check(
          challengeResponseCheck(sender.address, 'asked', sender.signChallenge('answered')),
        ),
        pool.check(challengeResponseCheck(target.address, 'c', sender.signChallenge('c'))),
        pool.check(challengeResponseCheck(sender.address, 'c', 'sig1notasignature')),
      ]);
      assert.equal(hex(digest), hex(envelopeDigest(envelope)));
      assert.deepEqual(
        [high, low, wrongChallenge, wrongKey, malformed],
        [true, true, false, false, false],
      );
    });

    it('answers every check of a burst with its own verdict', async () => {
      const envelopes = Array.from({ length: 200 }, (_, nonce) => signed({ nonce }));
      const tampered = new Set([3, 50, 51, 199]);
      const answers = await Promise.all(
        envelopes.map((envelope, index) =>
          pool.verify(tampered.has(index) ? { ...envelope, target: sender.address } : envelope),
        ),
      );
      for (const [index, digest] of answers.entries()) {
        if (tampered.has(index)) assert.equal(digest, undefined, `envelope ${index}`);
        else assert.equal(hex(digest), hex(envelopeDigest(envelopes[index]!)), `envelope ${index}`);
      }
    });
  });
}

describe('verifier pool shutdown', () => {
  it('fails checks still waiting and refuses new ones once closed', async () => {
    const pool = new VerifierPool(1, 'libsecp256k1');
    const envelope = signed({ nonce: 7 });
    assert.ok(await pool.verify(envelope), 'the thread works before the close');
    const waiting = Promise.allSettled(Array.from({ length: 50 }, () => pool.verify(envelope)));
    await pool.close();
    for (const outcome of await waiting) {
      // Each check was answered before the close or failed with it; none is left hanging.
      if (outcome.status === 'rejected') assert.match(String(outcome.reason), /closed/);
    }
    await assert.rejects(pool.verify(envelope), /closed/);
  });

  it('needs at least one thread', () => {
    assert.throws(() => new VerifierPool(0, 'libsecp256k1'), RangeError);
  });
});
