import { createECDH, createPrivateKey, randomBytes, sign, type KeyObject } from 'node:crypto';
import { envelopeSigningBytes, type EnvelopeFields } from './envelope.js';
import { CryptoFormatError } from './errors.js';
import { agentAddressFromPublicKey, encodeSignature } from './keys.js';

const PRIVATE_KEY_LENGTH = 32;

/**
 * An agent key that signs as a uAgents `Identity` does (ECDSA over SHA-256 on secp256k1, the
 * 64-byte r‖s as `sig1…`), for the identities Agentry holds and speaks as itself (a user's chat
 * identity). The private key never leaves the object but through {@link privateKeyHex}, for
 * sealing at rest.
 */
export class SigningKey {
  readonly address: string;
  private readonly key: KeyObject;
  private readonly publicKey: Buffer;

  private constructor(private readonly privateKey: Buffer) {
    if (privateKey.length !== PRIVATE_KEY_LENGTH) {
      throw new CryptoFormatError(`a private key is ${PRIVATE_KEY_LENGTH} bytes`);
    }
    const ecdh = createECDH('secp256k1');
    ecdh.setPrivateKey(privateKey);
    this.publicKey = ecdh.getPublicKey(null, 'compressed');
    this.address = agentAddressFromPublicKey(this.publicKey);
    const point = ecdh.getPublicKey();
    this.key = createPrivateKey({
      key: {
        kty: 'EC',
        crv: 'secp256k1',
        d: privateKey.toString('base64url'),
        x: point.subarray(1, 33).toString('base64url'),
        y: point.subarray(33).toString('base64url'),
      },
      format: 'jwk',
    });
  }

  /** A new random key. */
  static generate(): SigningKey {
    for (;;) {
      try {
        return new SigningKey(randomBytes(PRIVATE_KEY_LENGTH));
      } catch {
        // Zero or past the curve order (about one in 2¹²⁸): draw again.
      }
    }
  }

  /** The key {@link privateKeyHex} gave. */
  static fromHex(hex: string): SigningKey {
    if (!/^[0-9a-f]{64}$/.test(hex)) throw new CryptoFormatError('not a private key');
    return new SigningKey(Buffer.from(hex, 'hex'));
  }

  privateKeyHex(): string {
    return this.privateKey.toString('hex');
  }

  /** ECDSA-SHA256 over `message`, as a `sig1…` string. */
  sign(message: Uint8Array): string {
    return encodeSignature(sign('sha256', message, { key: this.key, dsaEncoding: 'ieee-p1363' }));
  }

  /**
   * An `attr:…` credential (PROTOCOL.md §4), as sent after `Authorization: Agent `: this key's
   * public key, the window in unix seconds and a random nonce, signed.
   */
  attestation(validFrom: number, validTo: number): string {
    const window = Buffer.alloc(16);
    window.writeBigUInt64BE(BigInt(validFrom), 0);
    window.writeBigUInt64BE(BigInt(validTo), 8);
    const payload = Buffer.concat([this.publicKey, window, randomBytes(32)]);
    return `attr:${payload.toString('base64')}:${this.sign(payload)}`;
  }

  /** The envelope, signed by this key (its sender must be this key's address). */
  signEnvelope(envelope: Omit<EnvelopeFields, 'signature'>): EnvelopeFields {
    if (envelope.sender !== this.address) {
      throw new CryptoFormatError('an envelope is signed by its sender');
    }
    return { ...envelope, signature: this.sign(envelopeSigningBytes(envelope)) };
  }
}
