import { Type, type Static } from '@sinclair/typebox';
import { AgentAddress, Nullable, StringEnum } from './common.js';
import { CHAT_TEXT_MAX_LENGTH } from './chat.js';

/** To whom an agent is served over A2A (docs/a2a.md, "Serving an agent"). */
export const A2A_ACCESS = ['off', 'private', 'public'] as const;

export const A2aSetting = Type.Object({
  address: Type.String(),
  access: StringEnum(A2A_ACCESS, {
    description:
      'off: not served; private: to callers with an API key of this Agentry; public: to anyone',
  }),
  card_url: Nullable(Type.String({ description: 'where the agent card is served; null when off' })),
  url: Nullable(
    Type.String({ description: 'the A2A JSON-RPC endpoint of the agent; null when off' }),
  ),
});

export const A2aSettingRequest = Type.Object({
  access: StringEnum(A2A_ACCESS, {
    description:
      'off: not served; private: to callers with an API key of this Agentry; public: to anyone',
  }),
});
export type A2aSettingRequest = Static<typeof A2aSettingRequest>;

export const A2aParams = Type.Object({ address: AgentAddress });

export const AgentCardsQuery = Type.Object({
  after: Type.Optional(
    Type.String({ maxLength: 100, description: 'the last address of the page before' }),
  ),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 50 })),
});

export const AgentCardsIndex = Type.Object({
  agents: Type.Array(
    Type.Object({
      address: Type.String(),
      card_url: Type.String(),
      card: Type.Unknown({ description: 'the agent card (A2A 1.0)' }),
    }),
  ),
  next_after: Nullable(
    Type.String({ description: 'pass as `after` for the next page; null on the last' }),
  ),
});

/** The most text one A2A message may carry to an agent: what one chat message may. */
export const A2A_TEXT_MAX_LENGTH = CHAT_TEXT_MAX_LENGTH;

/** A JSON-RPC error answer of an A2A endpoint. */
export const A2aRpcError = Type.Object({
  jsonrpc: Type.Literal('2.0'),
  id: Type.Union([Type.String(), Type.Number(), Type.Null()]),
  error: Type.Object({
    code: Type.Integer(),
    message: Type.String(),
    data: Type.Optional(Type.Unknown()),
  }),
});
