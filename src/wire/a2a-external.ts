import { Type, type Static } from '@sinclair/typebox';
import {
  AgentAddress,
  BoundedInteger,
  MAX_OFFSET,
  StringEnum,
  Timestamp,
  WireString,
} from './common.js';

// External A2A agents (docs/a2a.md, "Inward"): agents that speak A2A elsewhere,
// registered here by their card's URL and reached by uAgents agents at an address Agentry holds.

/** The longest card URL taken. */
export const CARD_URL_MAX_LENGTH = 2048;

export const ExternalAgentRequest = Type.Object({
  card_url: WireString('http-url', {
    maxLength: CARD_URL_MAX_LENGTH,
    description:
      'where the agent’s card is read: an http:// or https:// URL, such as https://example.com/.well-known/agent-card.json',
  }),
});
export type ExternalAgentRequest = Static<typeof ExternalAgentRequest>;

export const ExternalAgentSkill = Type.Object({
  id: Type.String(),
  name: Type.String(),
  description: Type.String(),
  tags: Type.Array(Type.String()),
  examples: Type.Array(Type.String()),
});
export type ExternalAgentSkill = Static<typeof ExternalAgentSkill>;

export const ExternalAgent = Type.Object({
  address: AgentAddress,
  name: Type.String({ description: 'the name its card gives' }),
  description: Type.String(),
  card_url: Type.String(),
  rpc_url: Type.String({ description: 'the JSON-RPC interface Agentry calls' }),
  protocol_version: StringEnum(['1.0', '0.3'] as const, {
    description: 'the A2A version Agentry speaks with it',
  }),
  skills: Type.Array(ExternalAgentSkill),
  card_read_at: Timestamp,
  created_at: Timestamp,
});
export type ExternalAgent = Static<typeof ExternalAgent>;

export const ExternalAgentsQuery = Type.Object({
  limit: Type.Optional(BoundedInteger({ minimum: 1, maximum: 100, default: 20 })),
  offset: Type.Optional(BoundedInteger({ maximum: MAX_OFFSET, default: 0 })),
});
export type ExternalAgentsQuery = Static<typeof ExternalAgentsQuery>;
