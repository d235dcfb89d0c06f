import { Type, type TSchema, type Static } from '@sinclair/typebox';
import type { WireFormatName } from './formats.js';

/**
 * `T | null` as a JSON-schema type list rather than `anyOf`, so a wrong value yields one
 * validation item (as pydantic reports it) instead of one per branch.
 */
export function Nullable<T extends TSchema>(schema: T) {
  const type = (schema as { type?: unknown }).type;
  return Type.Unsafe<Static<T> | null>({ ...schema, type: [type, 'null'] });
}

/** One of a few strings, as a JSON-schema `enum`: one 422 item naming every allowed value. */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  options: { default?: T[number]; description?: string } = {},
) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: values, ...options });
}

/** A string in one of the wire formats (src/wire/formats.ts), checked at the edge. */
export function WireString(
  format: WireFormatName,
  options: { maxLength?: number; description?: string } = {},
) {
  return Type.String({ ...options, format });
}

/**
 * An integer within bounds: JSON numbers and query strings such as `1e400` or `Infinity`
 * never reach a service or the database. By default any non-negative integer JavaScript
 * holds exactly.
 */
export function BoundedInteger(
  options: {
    minimum?: number;
    exclusiveMinimum?: number;
    maximum?: number;
    default?: number;
    description?: string;
  } = {},
) {
  return Type.Integer({
    ...(options.exclusiveMinimum === undefined ? { minimum: 0 } : {}),
    maximum: Number.MAX_SAFE_INTEGER,
    ...options,
  });
}

/** The largest page offset a list takes. */
export const MAX_OFFSET = 2_147_483_647;

/** A moment as ISO-8601 with an explicit UTC offset (see {@link isoTimestamp}). */
export const Timestamp = Type.String({ format: 'date-time' });

/**
 * A moment as clients read it: ISO-8601 in UTC with an explicit `+00:00` offset and six
 * fractional digits, as Python's `datetime.isoformat()` writes it. Older Python's
 * `fromisoformat` rejects a trailing `Z`, and some accept only three or six digits.
 */
export function isoTimestamp(ms: number): string {
  const second = Math.floor(ms / 1000);
  let prefix = secondPrefixes.get(second);
  if (prefix === undefined) {
    // toISOString is always YYYY-MM-DDTHH:MM:SS.sssZ for the years a timestamp here can have.
    prefix = new Date(second * 1000).toISOString().slice(0, 20);
    if (secondPrefixes.size >= SECOND_PREFIXES) secondPrefixes.clear();
    secondPrefixes.set(second, prefix);
  }
  return `${prefix}${String(ms - second * 1000).padStart(3, '0')}000+00:00`;
}

/**
 * "YYYY-MM-DDTHH:MM:SS." of recent seconds: a poll formats two moments per message, and the
 * messages of one mailbox mostly arrived within a few seconds of one another, so formatting
 * each date in full (a third of a poll's own time) is mostly done once per second instead.
 */
const secondPrefixes = new Map<number, string>();
const SECOND_PREFIXES = 1024;

export const ErrorDetail = Type.Object(
  { detail: Type.String() },
  { $id: 'ErrorDetail', description: 'Any error other than validation' },
);

const ValidationIssue = Type.Object({
  loc: Type.Array(Type.Union([Type.String(), Type.Integer()])),
  msg: Type.String(),
  type: Type.String(),
  input: Type.Optional(Type.Unknown()),
  ctx: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});

export const ValidationErrorBody = Type.Object(
  { detail: Type.Array(ValidationIssue) },
  { $id: 'HTTPValidationError', description: 'Validation error, pydantic style' },
);

export const EmptyObject = Type.Object({}, { additionalProperties: true });

/** The answer of a write that has nothing else to say. */
export const Success = Type.Object({ success: Type.Boolean() });

/** An agent's address; canonical (lower case) once validated. */
export const AgentAddress = WireString('agent-address', {
  maxLength: 66,
  description: 'bech32 agent address (agent1…) of a compressed secp256k1 key',
});

export const AddressParams = Type.Object({ address: AgentAddress });

/**
 * An endpoint's weight: a positive whole number that JSON carries exactly (`1e400` parses as
 * Infinity, which would be stored as null).
 */
export const EndpointWeight = BoundedInteger({ exclusiveMinimum: 0 });

/** Where an agent receives envelopes, and how often it is picked among its endpoints. */
export const Endpoint = Type.Object({ url: Type.String(), weight: EndpointWeight });
export type Endpoint = Static<typeof Endpoint>;

/** Standard error answers a route may give, for the OpenAPI document. */
export function errorResponses(...codes: number[]): Record<number, TSchema> {
  const out: Record<number, TSchema> = {};
  for (const code of codes) {
    out[code] = code === 422 ? Type.Ref(ValidationErrorBody) : Type.Ref(ErrorDetail);
  }
  return out;
}
