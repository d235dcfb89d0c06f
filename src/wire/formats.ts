import { isUtf8 } from 'node:buffer';
import { almanacSignerAddress, canonicalUuid, isAgentAddress } from '../crypto/index.js';
import type { ValidationIssue } from '../errors.js';

/**
 * Formats of text values on the wire, named in the schemas as `format` and enforced by the
 * validation plugin before any handler runs. A value in a format with a canonical spelling is
 * rewritten to it in place (an upper-case address becomes lower-case), so that everything
 * past the edge sees one spelling. Values that are covered by a signature (envelope fields,
 * Almanac identifiers) use formats without a canonical spelling: they are checked and kept
 * exactly as sent.
 */
export interface WireFormat {
  /** The value in its canonical spelling, or undefined when it is not in this format. */
  canonical(value: string): string | undefined;
  /** Whether a valid value is rewritten to {@link canonical}'s answer. */
  rewrite: boolean;
  /** The 422 item (without `loc` and `input`) for a value that is not in this format. */
  issue(value: string): Omit<ValidationIssue, 'loc' | 'input'>;
}

const ADDRESS_MESSAGE =
  'Value error, not a valid agent address (bech32 "agent1…" of a compressed secp256k1 key)';

const IDENTIFIER_MESSAGE =
  'Value error, agent_identifier must be agent://<agent address>, test-agent://<agent address> or an agent address';

const notAUuid = {
  msg: 'Input should be a valid UUID, unable to parse string as a UUID',
  type: 'uuid_parsing',
};

function unlessThrows(make: () => string): string | undefined {
  try {
    return make();
  } catch {
    return undefined;
  }
}

const uuid = (value: string) => unlessThrows(() => canonicalUuid(value));

/**
 * The shape of a lower-case bech32 address: prefix, separator and data characters of the
 * right count (`agent1` + 59 for a 33-byte key, `user1` + 58 for 32 bytes). The checksum is
 * left to what follows: a sender's signature check decodes it, a target must equal a
 * registered address, a user sender the user's own. A regular expression costs a fraction of
 * a full decode, on every submit.
 */
const AGENT_ADDRESS_SHAPE = /^agent1[02-9ac-hj-np-z]{59}$/;
const USER_ADDRESS_SHAPE = /^user1[02-9ac-hj-np-z]{58}$/;

/**
 * Whether `value` is padded standard base64 of a UTF-8 text: what uAgents' `decode_payload`
 * reads. One decoding pass: Node's decoder skips characters outside the alphabet and stops
 * at misplaced padding, so any of them leaves fewer bytes than the length promises; it also
 * takes the URL-safe alphabet, which Python's does not, so those two are looked for first.
 */
function isBase64OfUtf8(value: string): boolean {
  if (value.length % 4 !== 0 || value.includes('-') || value.includes('_')) return false;
  const padding = value.endsWith('==') ? 2 : value.endsWith('=') ? 1 : 0;
  const bytes = Buffer.from(value, 'base64');
  return bytes.length === (value.length / 4) * 3 - padding && isUtf8(bytes);
}

const BASE64_STANDARD = /^[A-Za-z0-9+/]*$/;
const BASE64_URL_SAFE = /^[A-Za-z0-9_-]*$/;

/**
 * Whether `value` is base64 as clients write it: the standard alphabet or the URL-safe one,
 * padded or not (Python's `b64encode` pads the standard one). No whitespace.
 */
function isBase64(value: string): boolean {
  const padding = value.endsWith('==') ? 2 : value.endsWith('=') ? 1 : 0;
  if (padding > 0 && value.length % 4 !== 0) return false;
  const body = padding > 0 ? value.slice(0, -padding) : value;
  if (body.length % 4 === 1) return false;
  return BASE64_STANDARD.test(body) || BASE64_URL_SAFE.test(body);
}

/** `type/subtype`, optionally with parameters (`; charset=utf-8`), as RFC 6838 spells them. */
const MIME_TYPE =
  /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}(?:\s*;[\x20-\x7e]*)?$/;

const SCHEMA_DIGEST = /^model:[0-9a-f]{64}$/;
const PROTOCOL_DIGEST = /^proto:[0-9a-f]{64}$/;

export const wireFormats = {
  /** bech32 `agent1…` of a compressed secp256k1 key; canonical in lower case. */
  'agent-address': {
    canonical: (value) => (isAgentAddress(value) ? value.toLowerCase() : undefined),
    rewrite: true,
    issue: () => ({ msg: ADDRESS_MESSAGE, type: 'value_error' }),
  },
  /** A UUID in any spelling pydantic parses; canonical lower-case and hyphenated. */
  uuid: {
    canonical: uuid,
    rewrite: true,
    issue: () => notAUuid,
  },
  /**
   * A version-4 UUID, kept as sent (an envelope's `session` is signed): uAgents declares it a
   * UUID4 and drops a whole mailbox page when one item fails to parse.
   */
  uuid4: {
    canonical: (value) => (uuid(value)?.[14] === '4' ? value : undefined),
    rewrite: false,
    issue: (value) =>
      uuid(value) === undefined
        ? notAUuid
        : { msg: 'UUID version 4 expected', type: 'uuid_version', ctx: { expected_version: 4 } },
  },
  /**
   * An envelope's `sender`: a lower-case `agent1…` or `user1…` address, kept as sent (it is
   * signed). The recipient's client compares addresses as text, so no other spelling is
   * admitted.
   */
  'envelope-sender': {
    canonical: (value) =>
      AGENT_ADDRESS_SHAPE.test(value) || USER_ADDRESS_SHAPE.test(value) ? value : undefined,
    rewrite: false,
    issue: () => ({
      msg: 'Value error, sender must be an agent1… or user1… address in lower case',
      type: 'value_error',
    }),
  },
  /**
   * An envelope's `target`: a lower-case `agent1…` address, kept as sent (it is signed).
   * uAgents ignores, and never deletes, a message whose target is spelled otherwise.
   */
  'envelope-target': {
    canonical: (value) => (AGENT_ADDRESS_SHAPE.test(value) ? value : undefined),
    rewrite: false,
    issue: () => ({
      msg: 'Value error, target must be an agent1… address in lower case',
      type: 'value_error',
    }),
  },
  /** Padded standard base64 of a UTF-8 text (an envelope's `payload`). */
  'base64-utf8': {
    canonical: (value) => (isBase64OfUtf8(value) ? value : undefined),
    rewrite: false,
    issue: () => ({
      msg: 'Value error, payload must be padded standard base64 of a UTF-8 text',
      type: 'value_error',
    }),
  },
  /** `model:` and 64 lower-case hex digits: the digest of a message schema. */
  'schema-digest': {
    canonical: (value) => (SCHEMA_DIGEST.test(value) ? value : undefined),
    rewrite: false,
    issue: () => ({
      msg: 'Value error, schema_digest must be model: followed by 64 lower-case hex digits',
      type: 'value_error',
    }),
  },
  /** `proto:` and 64 lower-case hex digits: the digest of a protocol manifest. */
  'protocol-digest': {
    canonical: (value) => (PROTOCOL_DIGEST.test(value) ? value : undefined),
    rewrite: false,
    issue: () => ({
      msg: 'Value error, protocol_digest must be proto: followed by 64 lower-case hex digits',
      type: 'value_error',
    }),
  },
  /** Base64 of any bytes, standard or URL-safe, padded or not (an asset's contents). */
  base64: {
    canonical: (value) => (isBase64(value) ? value : undefined),
    rewrite: false,
    issue: () => ({
      msg: 'Value error, contents must be base64 (standard or URL-safe alphabet, no whitespace)',
      type: 'value_error',
    }),
  },
  /** A MIME type such as `image/png` or `text/plain; charset=utf-8`. */
  'mime-type': {
    canonical: (value) => (MIME_TYPE.test(value) ? value : undefined),
    rewrite: false,
    issue: () => ({
      msg: 'Value error, mime_type must be a MIME type such as image/png',
      type: 'value_error',
    }),
  },
  /** `agent://<address>`, `test-agent://<address>`, `prefix://name/address` or an address. */
  'almanac-identifier': {
    canonical: (value) => unlessThrows(() => (almanacSignerAddress(value), value)),
    rewrite: false,
    issue: () => ({ msg: IDENTIFIER_MESSAGE, type: 'value_error' }),
  },
  /**
   * An absolute `http:` or `https:` URL (where a webhook is sent); canonical as the WHATWG
   * parser writes it, so that one address has one spelling. Where it points is checked when
   * it is connected to (src/infra/outbound.ts), not here: a name may resolve anywhere.
   */
  'http-url': {
    canonical: (value) => {
      const url = unlessThrows(() => new URL(value).href);
      return url !== undefined && /^https?:\/\/[^/]/.test(url) ? url : undefined;
    },
    rewrite: true,
    issue: () => ({
      msg: 'Value error, url must be an absolute http:// or https:// URL',
      type: 'value_error',
    }),
  },
  /**
   * A moment as pydantic writes a `datetime`: ISO-8601 date and time with up to nine
   * fractional digits and `Z`, an offset, or none (read as UTC). Rewritten to the service's
   * own spelling (UTC, `+00:00`, six digits), which {@link momentMs} reads back.
   */
  moment: {
    canonical: (value) => {
      const ms = parseMoment(value);
      return ms === undefined ? undefined : isoMoment(ms);
    },
    rewrite: true,
    issue: () => ({
      msg: 'Input should be a valid datetime (ISO-8601, such as 2026-11-24T10:00:00.000000Z)',
      type: 'datetime_parsing',
    }),
  },
} satisfies Record<string, WireFormat>;

const MOMENT =
  /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|z|[+-]\d{2}:?\d{2})?$/;

/** Milliseconds since the epoch of an ISO-8601 moment; undefined when it is not one. */
function parseMoment(value: string): number | undefined {
  const match = MOMENT.exec(value);
  if (!match) return undefined;
  const [, year, month, day, hour, minute, second, fraction = '', zone = 'Z'] = match;
  const ms = Date.UTC(
    Number(year),
    Number(month) - 1,
    Number(day),
    Number(hour),
    Number(minute),
    Number(second),
    Number(fraction.padEnd(3, '0').slice(0, 3)),
  );
  const date = new Date(ms);
  // Date.UTC rolls 31 February over into March: only dates that exist pass.
  if (
    date.getUTCFullYear() !== Number(year) ||
    date.getUTCMonth() !== Number(month) - 1 ||
    date.getUTCDate() !== Number(day) ||
    Number(hour) > 23 ||
    Number(minute) > 59 ||
    Number(second) > 59
  ) {
    return undefined;
  }
  if (zone === 'Z' || zone === 'z') return ms;
  const sign = zone.startsWith('-') ? -1 : 1;
  const digits = zone.slice(1).replace(':', '');
  const offset = Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2));
  if (offset > 18 * 60) return undefined;
  return ms - sign * offset * 60_000;
}

/** UTC, `+00:00`, six fractional digits (the spelling of `isoTimestamp` in common.ts). */
function isoMoment(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 23)}000+00:00`;
}

/** Milliseconds of a value the `moment` format accepted (and so rewrote). */
export function momentMs(value: string): number {
  return Date.parse(value);
}

export type WireFormatName = keyof typeof wireFormats;

/** The canonical spelling of an agent address, or undefined (for values outside a schema). */
export function canonicalAgentAddress(value: string): string | undefined {
  return wireFormats['agent-address'].canonical(value);
}

/** Whether a value (such as a Content-Type header) is a MIME type as the `mime-type` format takes it. */
export function isMimeType(value: string): boolean {
  return value.length <= 255 && MIME_TYPE.test(value);
}
