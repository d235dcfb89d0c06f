import { Type, type Static } from '@sinclair/typebox';
import { AgentAddress, Nullable, Timestamp } from './common.js';

/** The most agents one key may be limited to. */
export const MAX_KEY_ADDRESSES = 100;

/** What every answer about an API key says of it. */
const apiKeyFields = {
  id: Type.String(),
  label: Nullable(Type.String()),
  created_at: Timestamp,
  expires_at: Nullable(Timestamp),
  read_only: Type.Boolean({ description: 'True for a key that may only read (GET and HEAD)' }),
  addresses: Nullable(
    Type.Array(Type.String(), {
      description: 'The agents the key may act on; null for all of the owner’s agents',
    }),
  ),
};

export const ApiKey = Type.Object({
  ...apiKeyFields,
  revoked_at: Nullable(Timestamp),
  current: Type.Boolean({ description: 'True for the key (or session key) making this call' }),
});
export type ApiKey = Static<typeof ApiKey>;

export const ApiKeyList = Type.Array(ApiKey);

export const NewApiKey = Type.Object({
  ...apiKeyFields,
  key: Type.String({ description: 'The API key; it is shown this once only' }),
});
export type NewApiKey = Static<typeof NewApiKey>;

/** The longest lifetime a key made over HTTP may be given: ten years. */
const MAX_LIFETIME_SECONDS = 10 * 366 * 24 * 3600;

export const CreateApiKeyRequest = Type.Object({
  label: Type.Optional(Nullable(Type.String({ maxLength: 100 }))),
  expires_in_seconds: Type.Optional(
    Nullable(
      Type.Integer({
        minimum: 60,
        maximum: MAX_LIFETIME_SECONDS,
        description: 'Lifetime of the key; null or absent for a key that does not expire',
      }),
    ),
  ),
  read_only: Type.Optional(
    Type.Boolean({
      description: 'Limits the key to reading: every call but GET and HEAD is refused (403)',
    }),
  ),
  addresses: Type.Optional(
    Nullable(
      Type.Array(AgentAddress, {
        minItems: 1,
        maxItems: MAX_KEY_ADDRESSES,
        description:
          'Limits the key to calls about these agents (the path’s address, or the body’s on POST /v2/agents and POST /v2/identity); any other call is refused (403). Null or absent: every agent',
      }),
    ),
  ),
});

export const KeyParams = Type.Object({
  id: Type.String({ pattern: '^[a-z2-7]{12}$', description: 'The id of an API key' }),
});
