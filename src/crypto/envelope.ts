import { createHash } from 'node:crypto';
import { CryptoFormatError, unlessMalformed } from './errors.js';
import { signerKeyFromAgentAddress } from './keys.js';
import { verifyBech32Signature } from './signatures.js';
import type { SignatureVerifier } from './verifier.js';

/** A uAgents envelope as it travels in JSON. */
export interface EnvelopeFields {
  version: number;
  sender: string;
  target: string;
  session: string;
  schema_digest: string;
  protocol_digest?: string | null;
  /** base64 of a UTF-8 JSON text; signed as this string, not decoded. */
  payload?: string | null;
  expires?: number | null;
  nonce?: number | null;
  signature?: string | null;
}

/**
 * The bytes the sender signs (PROTOCOL.md §5): sender ‖ target ‖ session ‖ schema_digest
 * ‖ payload? ‖ uint64be(expires)? ‖ uint64be(nonce)?. `version` and `protocol_digest` are not
 * signed. Throws {@link CryptoFormatError} for a session that is not a UUID and for expires or
 * nonce values that cannot be packed exactly.
 */
export function envelopeSigningBytes(envelope: EnvelopeFields): Uint8Array {
  const parts: Uint8Array[] = [
    Buffer.from(envelope.sender, 'utf8'),
    Buffer.from(envelope.target, 'utf8'),
    Buffer.from(canonicalUuid(envelope.session), 'utf8'),
    Buffer.from(envelope.schema_digest, 'utf8'),
  ];
  if (envelope.payload != null) parts.push(Buffer.from(envelope.payload, 'utf8'));
  if (envelope.expires != null) parts.push(uint64BigEndian(envelope.expires, 'expires'));
  if (envelope.nonce != null) parts.push(uint64BigEndian(envelope.nonce, 'nonce'));
  return Buffer.concat(parts);
}

/** sha256 of the signing bytes: what uAgents signs, and a stable idempotency key. */
export function envelopeDigest(envelope: EnvelopeFields): Uint8Array {
  return digestOf(envelopeSigningBytes(envelope));
}

function digestOf(signingBytes: Uint8Array): Uint8Array {
  return createHash('sha256').update(signingBytes).digest();
}

/**
 * True only when the envelope carries a valid signature by its `sender`'s key. Unsigned
 * envelopes, non-agent senders and malformed fields are `false`.
 */
export function verifyEnvelopeSignature(
  verifier: SignatureVerifier,
  envelope: EnvelopeFields,
): boolean {
  return verifiedEnvelopeDigest(verifier, envelope) !== undefined;
}

/**
 * {@link envelopeDigest} of an envelope that {@link verifyEnvelopeSignature} accepts, and
 * undefined for any other: one pass over the signing bytes serves the check and the digest.
 */
export function verifiedEnvelopeDigest(
  verifier: SignatureVerifier,
  envelope: EnvelopeFields,
): Uint8Array | undefined {
  if (envelope.signature == null) return undefined;
  const publicKey = unlessMalformed(() => signerKeyFromAgentAddress(envelope.sender));
  const message = unlessMalformed(() => envelopeSigningBytes(envelope));
  if (
    publicKey === undefined ||
    message === undefined ||
    !verifyBech32Signature(verifier, message, envelope.signature, publicKey)
  ) {
    return undefined;
  }
  return digestOf(message);
}

const HYPHENATED_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const SIMPLE_UUID = /^[0-9a-f]{32}$/i;

/**
 * Python signs `str(session)`, the lower-case hyphenated form, whatever spelling arrived.
 * Accepted spellings are those pydantic's UUID field parses: hyphenated, 32 hex digits,
 * `{hyphenated}` and `urn:uuid:hyphenated`, in either case. Throws
 * {@link CryptoFormatError} for anything else.
 */
export function canonicalUuid(value: string): string {
  const hex = uuidHexDigits(value).toLowerCase();
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function uuidHexDigits(value: string): string {
  const braced = value.startsWith('{') && value.endsWith('}');
  const inner = braced ? value.slice(1, -1) : value.replace(/^urn:uuid:/, '');
  if (HYPHENATED_UUID.test(inner)) return inner.replaceAll('-', '');
  if (SIMPLE_UUID.test(value)) return value;
  throw new CryptoFormatError('envelope session is not a UUID');
}

/**
 * Python packs any int below 2⁶⁴; after JSON.parse only integers up to 2⁵³ are still exact,
 * so larger ones cannot reproduce the signed bytes and are refused.
 */
function uint64BigEndian(value: number, field: string): Buffer {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new CryptoFormatError(`envelope ${field} must be a non-negative safe integer`);
  }
  const bytes = Buffer.alloc(8);
  bytes.writeBigUInt64BE(BigInt(value));
  return bytes;
}
