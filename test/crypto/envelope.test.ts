import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  CryptoFormatError,
  encodeBech32,
  envelopeDigest,
  envelopeSigningBytes,
  verifyEnvelopeSignature,
  type EnvelopeFields,
} from '../../src/crypto/index.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { vectors } from '../kit/vectors.js';
import { verifiers } from '../kit/verifiers.js';

const SESSION = '4f1b0c62-1d3e-4d5c-9a8b-7c6d5e4f3a21';

const bare: EnvelopeFields = {
  version: 1,
  sender: 'agent1sender',
  target: 'agent1target',
  session: SESSION,
  schema_digest: 'model:ab',
  protocol_digest: 'proto:cd',
  payload: null,
  expires: null,
  nonce: null,
};

const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString('latin1');

for (const verifier of verifiers) {
  describe(`envelope vectors with ${verifier.kind}`, () => {
    for (const { envelope, valid, note } of vectors.envelopes) {
      it(`${valid ? 'accepts' : 'rejects'} an envelope: ${note}`, () => {
        assert.equal(verifyEnvelopeSignature(verifier, envelope), valid);
      });
    }
  });

  describe(`verifyEnvelopeSignature with ${verifier.kind}`, () => {
    const sender = TestIdentity.random();
    const signed = sender.signEnvelope(
      makeEnvelope({
        sender: sender.address,
        target: TestIdentity.random().address,
        payloadJson: '{}',
      }),
    );

    it('ignores version and protocol_digest, which are not signed', () => {
      const edited = { ...signed, version: 2, protocol_digest: 'proto:other' };
      assert.equal(verifyEnvelopeSignature(verifier, edited), true);
    });

    it('accepts the session spelled in upper case', () => {
      const session = signed.session.toUpperCase();
      assert.equal(verifyEnvelopeSignature(verifier, { ...signed, session }), true);
    });

    it('returns false, without throwing, for an unsigned envelope or a user sender', () => {
      assert.equal(verifyEnvelopeSignature(verifier, { ...signed, signature: null }), false);
      assert.equal(verifyEnvelopeSignature(verifier, { ...signed, signature: undefined }), false);
      const user = encodeBech32('user', sender.publicKey.subarray(1));
      assert.equal(verifyEnvelopeSignature(verifier, { ...signed, sender: user }), false);
    });

    it('returns false, without throwing, for a session that is not a UUID or a fractional nonce', () => {
      assert.equal(verifyEnvelopeSignature(verifier, { ...signed, session: 'session' }), false);
      assert.equal(verifyEnvelopeSignature(verifier, { ...signed, nonce: 1.5 }), false);
    });
  });
}

describe('envelopeSigningBytes', () => {
  it('is sender, target, session and schema digest alone when payload, expires and nonce are null', () => {
    assert.equal(text(envelopeSigningBytes(bare)), `agent1senderagent1target${SESSION}model:ab`);
  });

  it('treats absent payload, expires and nonce like null', () => {
    const { payload: _p, expires: _e, nonce: _n, ...absent } = bare;
    assert.equal(text(envelopeSigningBytes(absent)), text(envelopeSigningBytes(bare)));
  });

  it('appends the payload string, then expires and nonce as 8-byte big-endian integers', () => {
    const bytes = envelopeSigningBytes({
      ...bare,
      payload: 'e30=',
      expires: 1_790_003_600,
      nonce: 42,
    });
    const prefix = `agent1senderagent1target${SESSION}model:abe30=`;
    assert.equal(text(bytes.subarray(0, prefix.length)), prefix);
    assert.equal(
      Buffer.from(bytes.subarray(prefix.length)).toString('hex'),
      '000000006ab14990' + '000000000000002a',
    );
  });

  it('packs a nonce of zero rather than skipping it', () => {
    assert.equal(
      envelopeSigningBytes({ ...bare, nonce: 0 }).length,
      envelopeSigningBytes(bare).length + 8,
    );
  });

  it('signs the session as the lower-case hyphenated UUID whatever spelling arrived', () => {
    const canonical = text(envelopeSigningBytes(bare));
    const hex = SESSION.replaceAll('-', '');
    for (const session of [
      SESSION.toUpperCase(),
      hex,
      hex.toUpperCase(),
      `{${SESSION}}`,
      `urn:uuid:${SESSION}`,
    ]) {
      assert.equal(text(envelopeSigningBytes({ ...bare, session })), canonical, session);
    }
  });

  it('refuses sessions that are not a UUID', () => {
    const hex = SESSION.replaceAll('-', '');
    for (const session of [
      '',
      'session',
      `${SESSION}0`,
      `{${hex}}`,
      `urn:uuid:${hex}`,
      SESSION.replace('-', ''),
    ]) {
      assert.throws(() => envelopeSigningBytes({ ...bare, session }), CryptoFormatError, session);
    }
  });

  it('refuses expires or nonce values that cannot be packed exactly', () => {
    for (const value of [-1, 1.5, 2 ** 53, Number.NaN]) {
      assert.throws(() => envelopeSigningBytes({ ...bare, expires: value }), /expires/);
      assert.throws(() => envelopeSigningBytes({ ...bare, nonce: value }), /nonce/);
    }
  });
});

describe('envelopeDigest', () => {
  it('is the sha256 of the signing bytes', () => {
    const expected = createHash('sha256').update(envelopeSigningBytes(bare)).digest('hex');
    assert.equal(Buffer.from(envelopeDigest(bare)).toString('hex'), expected);
  });

  it('is the same for an envelope and its re-signed copy, and changes with the payload', () => {
    const [first] = vectors.envelopes;
    assert.ok(first);
    const resigned = { ...first.envelope, signature: 'sig1other' };
    assert.deepEqual(envelopeDigest(resigned), envelopeDigest(first.envelope));
    assert.notDeepEqual(
      envelopeDigest({ ...first.envelope, payload: 'e30=' }),
      envelopeDigest(first.envelope),
    );
  });
});
