import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bech32, bech32m } from '@scure/base';
import { CryptoFormatError, decodeBech32, encodeBech32 } from '../../src/crypto/index.js';
import { identityVector, vectors } from '../kit/vectors.js';

const LONG_SIGNATURE =
  'sig18rlcx4x40zcr03h6ekh0tmnd435vmfm7sj6fwh95msmss2fwaazut77y5vnn27mamfdqwa2c0adgs97hj66g6daqdlv56jlva240trgycuhqq';

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');

describe('bech32 vectors from uagents-core', () => {
  for (const vector of vectors.bech32) {
    if (vector.valid) {
      it(`decodes to prefix '${vector.prefix}' and its bytes: ${vector.note ?? vector.string}`, () => {
        const decoded = decodeBech32(vector.string);
        assert.equal(decoded.prefix, vector.prefix);
        assert.equal(hex(decoded.bytes), vector.hex);
      });
    } else {
      it(`rejects an invalid string: ${vector.note}`, () => {
        assert.throws(() => decodeBech32(vector.string), CryptoFormatError);
      });
    }
  }
});

describe('decodeBech32', () => {
  it('accepts strings far beyond BIP-173’s 90 characters', () => {
    const bytes = Uint8Array.from({ length: 200 }, (_, i) => i);
    const encoded = encodeBech32('long', bytes);
    assert.ok(encoded.length > 300);
    assert.equal(hex(decodeBech32(encoded, 'long').bytes), hex(bytes));
  });

  it('accepts an all-upper-case signature and lower-cases its prefix', () => {
    const decoded = decodeBech32(LONG_SIGNATURE.toUpperCase(), 'sig');
    assert.equal(decoded.prefix, 'sig');
    assert.equal(hex(decoded.bytes), hex(decodeBech32(LONG_SIGNATURE).bytes));
  });

  it('rejects a signature with one upper-case letter', () => {
    assert.throws(() => decodeBech32(LONG_SIGNATURE.replace('x4x', 'X4x')), CryptoFormatError);
  });

  it('rejects another prefix than the one expected', () => {
    const { address } = identityVector('alice');
    assert.throws(() => decodeBech32(address, 'user'), /prefix is 'agent', expected 'user'/);
  });

  it('rejects bech32m, whose checksum constant differs', () => {
    const encoded = bech32m.encode('agent', bech32m.toWords(new Uint8Array(33).fill(2)));
    assert.throws(() => decodeBech32(encoded), CryptoFormatError);
  });

  it('rejects data whose padding bits are not zero', () => {
    const words = bech32.toWords(new Uint8Array(33).fill(2));
    words[words.length - 1] = (words[words.length - 1] ?? 0) | 1;
    assert.throws(() => decodeBech32(bech32.encode('agent', words)), CryptoFormatError);
  });

  it('rejects characters outside printable ASCII, even in the prefix', () => {
    const encoded = encodeBech32('agent', new Uint8Array(33));
    assert.throws(() => decodeBech32(`é${encoded}`), CryptoFormatError);
    assert.throws(() => decodeBech32(` ${encoded}`), CryptoFormatError);
  });

  it('rejects strings without separator or checksum', () => {
    for (const value of ['', 'agent', 'agent1', '1qqqqqqqq', 'agent1qqqqq']) {
      assert.throws(() => decodeBech32(value), CryptoFormatError, value);
    }
  });
});

describe('encodeBech32', () => {
  it('re-encodes every valid vector to its lower-case spelling', () => {
    for (const vector of vectors.bech32) {
      if (!vector.valid) continue;
      const { prefix, bytes } = decodeBech32(vector.string);
      assert.equal(encodeBech32(prefix, bytes), vector.string.toLowerCase());
    }
  });
});
