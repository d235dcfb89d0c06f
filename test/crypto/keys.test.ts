import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import {
  agentAddressFromPublicKey,
  agentAddressFromSeed,
  CryptoFormatError,
  decodeSignature,
  encodeBech32,
  encodeSignature,
  isAgentAddress,
  isUserAddress,
  privateKeyFromSeed,
  publicKeyFromAgentAddress,
} from '../../src/crypto/index.js';
import { identityVector, vectors } from '../kit/vectors.js';

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');

function compressedKey(prefix: number, x: bigint): Uint8Array {
  return Buffer.from(
    prefix.toString(16).padStart(2, '0') + x.toString(16).padStart(64, '0'),
    'hex',
  );
}

function isPointForNoble(publicKey: Uint8Array): boolean {
  try {
    secp256k1.Point.fromHex(publicKey);
    return true;
  } catch {
    return false;
  }
}

function firstAbscissaOffTheCurve(): bigint {
  for (let x = 1n; ; x++) {
    if (!isPointForNoble(compressedKey(2, x))) return x;
  }
}

describe('agent addresses of the vector identities', () => {
  for (const identity of vectors.identities) {
    it(`maps ${identity.address} to and from public key ${identity.public_key_hex}`, () => {
      const publicKey = Buffer.from(identity.public_key_hex, 'hex');
      assert.equal(hex(publicKeyFromAgentAddress(identity.address)), identity.public_key_hex);
      assert.equal(agentAddressFromPublicKey(publicKey), identity.address);
      assert.equal(isAgentAddress(identity.address), true);
    });
  }
});

describe('publicKeyFromAgentAddress', () => {
  const offCurveX = firstAbscissaOffTheCurve();
  const malformed: Record<string, string> = {
    'a user address': encodeBech32('user', randomBytes(32)),
    'a 32-byte agent address': encodeBech32('agent', randomBytes(32)),
    'a 34-byte agent address': encodeBech32(
      'agent',
      Buffer.concat([Uint8Array.of(2), randomBytes(33)]),
    ),
    'an uncompressed-key prefix (0x04)': encodeBech32('agent', compressedKey(4, 1n)),
    'an x that is not on the curve': encodeBech32('agent', compressedKey(3, offCurveX)),
    'an x beyond the field prime': encodeBech32('agent', compressedKey(2, 2n ** 256n - 1n)),
    'a broken checksum': 'agent1qgxz6jc0kvta4vkcuqny3gf43x6xf23upp02kpexcjedlklpzpaa5jlncmx',
  };
  for (const [what, address] of Object.entries(malformed)) {
    it(`rejects ${what}, and isAgentAddress says false`, () => {
      assert.throws(() => publicKeyFromAgentAddress(address), CryptoFormatError);
      assert.equal(isAgentAddress(address), false);
    });
  }

  it('agrees with @noble/curves on which x coordinates are curve points', () => {
    for (let i = 0; i < 200; i++) {
      const key = Buffer.concat([Uint8Array.of(2 + (i % 2)), randomBytes(32)]);
      const address = encodeBech32('agent', key);
      assert.equal(isAgentAddress(address), isPointForNoble(key), hex(key));
    }
  });

  it('accepts an all-upper-case agent address', () => {
    const identity = identityVector('alice');
    assert.equal(
      hex(publicKeyFromAgentAddress(identity.address.toUpperCase())),
      identity.public_key_hex,
    );
  });
});

describe('agentAddressFromPublicKey', () => {
  it('refuses bytes that are not a compressed curve point', () => {
    assert.throws(() => agentAddressFromPublicKey(new Uint8Array(32)), CryptoFormatError);
    assert.throws(() => agentAddressFromPublicKey(compressedKey(5, 1n)), CryptoFormatError);
    assert.throws(
      () => agentAddressFromPublicKey(compressedKey(2, firstAbscissaOffTheCurve())),
      CryptoFormatError,
    );
  });
});

describe('isUserAddress', () => {
  it('accepts user1 with 32 bytes and nothing else', () => {
    assert.equal(isUserAddress(encodeBech32('user', randomBytes(32))), true);
    assert.equal(isUserAddress(encodeBech32('user', randomBytes(31))), false);
    assert.equal(isUserAddress(encodeBech32('user', randomBytes(33))), false);
    assert.equal(isUserAddress(encodeBech32('users', randomBytes(32))), false);
    assert.equal(isUserAddress(identityVector('alice').address), false);
    assert.equal(isUserAddress('user1'), false);
  });
});

describe('decodeSignature', () => {
  it('returns the 64 bytes r‖s of a sig1 string', () => {
    const rs = randomBytes(64);
    assert.equal(hex(decodeSignature(encodeBech32('sig', rs))), hex(rs));
  });

  for (const length of [63, 65]) {
    it(`rejects a ${length}-byte signature`, () => {
      assert.throws(() => decodeSignature(encodeBech32('sig', randomBytes(length))), /64 bytes/);
    });
  }

  it('rejects 64 bytes under another prefix', () => {
    assert.throws(() => decodeSignature(encodeBech32('sog', randomBytes(64))), CryptoFormatError);
  });

  it('is the inverse of encodeSignature, which refuses other lengths', () => {
    const rs = randomBytes(64);
    assert.equal(hex(decodeSignature(encodeSignature(rs))), hex(rs));
    assert.throws(() => encodeSignature(randomBytes(63)), CryptoFormatError);
  });
});

describe('agentAddressFromSeed', () => {
  it('derives the key and address of uagents Identity.from_seed for every vector', () => {
    assert.ok(vectors.identities.length > 0);
    for (const vector of vectors.identities) {
      assert.equal(hex(privateKeyFromSeed(vector.seed, vector.index)), vector.private_key_hex);
      assert.equal(agentAddressFromSeed(vector.seed, vector.index), vector.address);
    }
  });

  it('defaults to index 0 and refuses an index that is not a byte', () => {
    const seed = vectors.identities[0]!.seed;
    assert.equal(agentAddressFromSeed(seed), agentAddressFromSeed(seed, 0));
    assert.notEqual(agentAddressFromSeed(seed, 0), agentAddressFromSeed(seed, 1));
    assert.throws(() => privateKeyFromSeed(seed, 256), CryptoFormatError);
  });
});
