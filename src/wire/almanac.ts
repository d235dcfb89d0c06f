import { Type, type Static } from '@sinclair/typebox';
import { BoundedInteger, EndpointWeight, Nullable, StringEnum, WireString } from './common.js';

// Bodies follow uagents-core's pydantic models (uagents_core/registration.py); the signature
// covers every field of the model, so nothing here may change a value before it is checked.

const AgentIdentifier = WireString('almanac-identifier', {
  description: 'agent://<address>, test-agent://<address> or a bare agent address',
});

const Timestamp = BoundedInteger({ description: 'Unix seconds when the agent signed' });

const Signature = Type.String({
  description: 'bech32 "sig1…" signature of the sorted, compact Python JSON of every other field',
});

/** An Almanac endpoint: weights must be positive for resolution to pick it. */
export const AlmanacEndpoint = Type.Object({
  url: Type.String(),
  weight: EndpointWeight,
});

export const AlmanacMetadata = Nullable(
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
/** uagents-core types it `dict[str, str | list[str] | dict[str, str]]`. */
export type AlmanacMetadata = NonNullable<Static<typeof AlmanacMetadata>>;

export const AgentRegistrationAttestation = Type.Object({
  agent_identifier: AgentIdentifier,
  protocols: Type.Array(Type.String(), { description: 'protocol digests' }),
  endpoints: Type.Array(AlmanacEndpoint),
  metadata: Type.Optional(AlmanacMetadata),
  timestamp: Timestamp,
  signature: Signature,
});
export type AgentRegistrationAttestation = Static<typeof AgentRegistrationAttestation>;

export const AgentRegistrationAttestationBatch = Type.Object({
  attestations: Type.Array(AgentRegistrationAttestation, { maxItems: 1000 }),
});

export const AgentStatusUpdate = Type.Object({
  agent_identifier: AgentIdentifier,
  is_active: Type.Boolean(),
  timestamp: Timestamp,
  signature: Signature,
});
export type AgentStatusUpdate = Static<typeof AgentStatusUpdate>;

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
  endpoints: Type.Array(AlmanacEndpoint),
  protocols: Type.Array(Type.String()),
  metadata: Nullable(Type.Object({}, { additionalProperties: true })),
  domain_name: Nullable(Type.String({ description: 'the domain the agent is assigned to' })),
  expiry: Type.String({
    description: 'ISO-8601 with offset; the registration resolves until then',
  }),
});
export type AlmanacAgent = Static<typeof AlmanacAgent>;

/** A model of a manifest: its digest (`model:` and hex) and its JSON schema. */
export const ProtocolModel = Type.Object(
  { digest: Type.String(), schema: Type.Object({}, { additionalProperties: true }) },
  { additionalProperties: true },
);

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
    models: Type.Array(ProtocolModel),
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
export type ProtocolManifest = Static<typeof ProtocolManifest>;

export const ManifestDigestParams = Type.Object({
  digest: Type.String({ description: 'proto:<64 hex digits>, or the hex digits alone' }),
});

export const V2ManifestDigestParams = Type.Object({
  digest: Type.String({
    pattern: '^(proto:)?[0-9a-f]{64}$',
    description: 'the protocol digest: 64 hex digits, with or without proto:',
  }),
});

export const ManifestNameParams = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200, description: "the protocol's name" }),
});

export const ModelDigestParams = Type.Object({
  digest: Type.String({
    pattern: '^(model:)?[0-9a-f]{64}$',
    description: 'the model digest: 64 hex digits, with or without model:',
  }),
});
