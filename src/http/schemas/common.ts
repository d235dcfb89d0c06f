import { Type, type TSchema, type Static } from '@sinclair/typebox';

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

/** A moment as ISO-8601 with an explicit UTC offset (see `isoTimestamp`). */
export const Timestamp = Type.String({ format: 'date-time' });

export const ErrorDetail = Type.Object(
  { detail: Type.String() },
  { $id: 'ErrorDetail', description: 'Any error other than validation' },
);

export const ValidationIssue = Type.Object({
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

export const AgentAddress = Type.String({
  maxLength: 66,
  description: 'bech32 agent address (agent1…) of a compressed secp256k1 key',
});

export const AddressParams = Type.Object({ address: AgentAddress });

/** Standard error answers a route may give, for the OpenAPI document. */
export function errorResponses(...codes: number[]): Record<number, TSchema> {
  const out: Record<number, TSchema> = {};
  for (const code of codes) {
    out[code] = code === 422 ? Type.Ref(ValidationErrorBody) : Type.Ref(ErrorDetail);
  }
  return out;
}
