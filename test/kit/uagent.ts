import { createHash, randomBytes, randomInt, randomUUID } from 'node:crypto';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import {
  agentAddressFromPublicKey,
  encodeSignature,
  envelopeSigningBytes,
  type EnvelopeFields,
} from '../../src/crypto/index.js';

/**
 * Which half of the curve order s lands in. Python's `ecdsa` signs with a random k and never
 * normalises, so real clients send a high s about half the time: 'random' does the same.
 */
export type SHalf = 'high' | 'low' | 'random';

export interface SignOptions {
  s?: SHalf;
}

export const CURVE_ORDER = secp256k1.Point.CURVE().n;

/** The s of a 64-byte r‖s signature, to tell which half of the order it lies in. */
export function sValue(signature: Uint8Array): bigint {
  return BigInt(`0x${Buffer.from(signature.subarray(32)).toString('hex')}`);
}

function sha256(...parts: Uint8Array[]): Buffer {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return hash.digest();
}

function uint64BigEndian(value: number): Buffer {
  const bytes = Buffer.alloc(8);
  bytes.writeBigUInt64BE(BigInt(value));
  return bytes;
}

/** A test client key that signs exactly like a uAgents `Identity`. */
export class TestIdentity {
  readonly publicKey: Uint8Array;
  readonly address: string;

  private constructor(readonly privateKey: Uint8Array) {
    this.publicKey = secp256k1.getPublicKey(privateKey, true);
    this.address = agentAddressFromPublicKey(this.publicKey);
  }

  /** `Identity.from_seed(seed, index)` (PROTOCOL.md §2). */
  static fromSeed(seed: string, index = 0): TestIdentity {
    if (!Number.isInteger(index) || index < 0 || index > 255) {
      throw new RangeError(`key index must be a byte, got ${index}`);
    }
    const derivation = sha256(Buffer.from('agent', 'utf8'), Uint8Array.of(index));
    return new TestIdentity(sha256(derivation, sha256(Buffer.from(seed, 'utf8'))));
  }

  static random(): TestIdentity {
    return new TestIdentity(secp256k1.utils.randomSecretKey());
  }

  /** ECDSA-SHA256 over `message` as a `sig1…` string. */
  sign(message: Uint8Array, options: SignOptions = {}): string {
    const { r, s } = secp256k1.sign(sha256(message), this.privateKey, { extraEntropy: true });
    const half = options.s ?? 'random';
    const wantHigh = half === 'random' ? randomInt(2) === 1 : half === 'high';
    // noble returns the low s; its negation n − s is the other, equally valid, signature.
    const signature = new secp256k1.Signature(r, wantHigh ? CURVE_ORDER - s : s);
    return encodeSignature(signature.toBytes('compact'));
  }

  /** The identity proof's `challenge_response`. */
  signChallenge(challenge: string, options: SignOptions = {}): string {
    return this.sign(Buffer.from(challenge, 'utf8'), options);
  }

  /** An `attr:…` credential as sent after `Authorization: Agent `. */
  attestation(
    window: { validFrom: number; validTo: number; nonce?: Uint8Array },
    options: SignOptions = {},
  ): string {
    const payload = Buffer.concat([
      this.publicKey,
      uint64BigEndian(window.validFrom),
      uint64BigEndian(window.validTo),
      window.nonce ?? randomBytes(32),
    ]);
    return `attr:${payload.toString('base64')}:${this.sign(payload, options)}`;
  }

  /**
   * An `Authorization` header value for calls as this agent: an attestation valid from ten
   * seconds before `nowMs` (the service's clock, in milliseconds) for `validForSeconds`.
   */
  authorization(nowMs = Date.now(), validForSeconds = 1000): string {
    const now = Math.floor(nowMs / 1000);
    return `Agent ${this.attestation({ validFrom: now - 10, validTo: now + validForSeconds })}`;
  }

  /** Reuses the service's envelopeSigningBytes: the Python-made vectors pin those bytes down. */
  signEnvelope(
    envelope: Omit<EnvelopeFields, 'signature'>,
    options: SignOptions = {},
  ): EnvelopeFields {
    return { ...envelope, signature: this.sign(envelopeSigningBytes(envelope), options) };
  }
}

const TEST_SCHEMA_DIGEST = `model:${sha256(Buffer.from('agentry test model', 'utf8')).toString('hex')}`;

/** An unsigned envelope shaped like the ones uAgents sends. */
export function makeEnvelope(fields: {
  sender: string;
  target: string;
  payloadJson: string;
  expires?: number;
  nonce?: number;
  schemaDigest?: string;
  protocolDigest?: string;
}): Omit<EnvelopeFields, 'signature'> {
  return {
    version: 1,
    sender: fields.sender,
    target: fields.target,
    session: randomUUID(),
    schema_digest: fields.schemaDigest ?? TEST_SCHEMA_DIGEST,
    protocol_digest: fields.protocolDigest ?? null,
    payload: Buffer.from(fields.payloadJson, 'utf8').toString('base64'),
    expires: fields.expires ?? null,
    nonce: fields.nonce ?? null,
  };
}
