import { Type } from '@sinclair/typebox';
import { AgentAddress, Nullable } from './common.js';

/** A string literal union as one `enum`, so a wrong value is one 422 item as pydantic gives. */
function StringEnum<const T extends readonly string[]>(values: T, options: object = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: values, ...options });
}

// Bodies follow uagents-core's pydantic models (uagents_core/registration.py); the signature
// covers every field of the model, so nothing here may change a value before it is checked.

const AgentIdentifier = Type.String({
  description: 'agent://<address>, test-agent://<address> or a bare agent address',
});

const Timestamp = Type.Integer({ description: 'Unix seconds when the agent signed' });

const Signature = Type.String({
  description: 'bech32 "sig1…" signature of the sorted, compact Python JSON of every other field',
});

export const AgentEndpoint = Type.Object({
  url: Type.String(),
  weight: Type.Integer({ exclusiveMinimum: 0 }),
});

const AlmanacMetadata = Nullable(
  Type.Record(
    Type.String(),
    Type.Union([
      Type.String(),
      Type.Array(Type.String()),
      Type.Record(Type.String(), Type.String()),
    ]),
    { description: 'Signed as null when absent' },
  ),
);

export const AgentRegistrationAttestation = Type.Object({
  agent_identifier: AgentIdentifier,
  protocols: Type.Array(Type.String(), { description: 'protocol digests' }),
  endpoints: Type.Array(AgentEndpoint),
  metadata: Type.Optional(AlmanacMetadata),
  timestamp: Timestamp,
  signature: Signature,
});

export const AgentRegistrationAttestationBatch = Type.Object({
  attestations: Type.Array(AgentRegistrationAttestation, { maxItems: 1000 }),
});

export const AgentStatusUpdate = Type.Object({
  agent_identifier: AgentIdentifier,
  is_active: Type.Boolean(),
  timestamp: Timestamp,
  signature: Signature,
});

export const ResolveQuery = Type.Object({
  prefix: Type.Optional(
    StringEnum(['agent', 'test-agent'], {
      description: 'network of the identifier being resolved; absent matches either',
    }),
  ),
});

export const AlmanacAgent = Type.Object({
  address: Type.String(),
  status: StringEnum(['active', 'inactive']),
  type: StringEnum(['uagent', 'mailbox', 'proxy']),
  endpoints: Type.Array(AgentEndpoint),
  protocols: Type.Array(Type.String()),
  metadata: Nullable(Type.Object({}, { additionalProperties: true })),
  domain_name: Type.Null(),
  expiry: Type.String({
    description: 'ISO-8601 with offset; the registration resolves until then',
  }),
});

export const AgentAddressParams = Type.Object({ address: AgentAddress });

export const ProtocolManifest = Type.Object(
  {
    version: Type.String(),
    metadata: Type.Object(
      {
        name: Type.String(),
        version: Type.String(),
        digest: Type.String({ pattern: '^proto:[0-9a-f]{64}$' }),
      },
      { additionalProperties: true },
    ),
    models: Type.Array(
      Type.Object(
        { digest: Type.String(), schema: Type.Object({}, { additionalProperties: true }) },
        { additionalProperties: true },
      ),
    ),
    interactions: Type.Array(
      Type.Object(
        {
          type: Type.String(),
          request: Type.String(),
          responses: Type.Array(Type.String()),
        },
        { additionalProperties: true },
      ),
    ),
  },
  {
    additionalProperties: true,
    description: 'uagents-core ProtocolSpecification.manifest(); metadata.digest is its key',
  },
);

export const ManifestDigestParams = Type.Object({
  digest: Type.String({ description: 'proto:<64 hex digits>, or the hex digits alone' }),
});

export const DomainParams = Type.Object({ name: Type.String() });
