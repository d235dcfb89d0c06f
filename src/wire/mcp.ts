import { Type, type Static } from '@sinclair/typebox';
import {
  AgentAddress,
  BoundedInteger,
  Nullable,
  StringEnum,
  Timestamp,
  WireString,
} from './common.js';
import { CHAT_TEXT_MAX_LENGTH } from './chat.js';
import { AGENT_NETWORKS, LOG_LEVELS } from './hosting.js';

// The arguments of the MCP endpoint's tools (docs/mcp.md). Each is an object schema, listed by
// `tools/list` as the tool's `inputSchema`; unknown properties are refused, so that a
// misspelled argument is an error the assistant reads rather than a default it did not mean.

const closed = { additionalProperties: false } as const;

/** An agent as a person names it: its address, a name it holds (alice.agent) or its handle. */
const AgentName = Type.String({
  minLength: 1,
  maxLength: 256,
  description: 'the agent: its address (agent1…), a name it holds (alice.agent) or its handle',
});

const Address = { address: AgentAddress };

export const SearchAgentsArgs = Type.Object(
  {
    query: Type.String({ maxLength: 500, description: 'words to look for; empty lists all' }),
    limit: Type.Optional(BoundedInteger({ minimum: 1, maximum: 100, default: 10 })),
    offset: Type.Optional(BoundedInteger({ maximum: 10_000, default: 0 })),
  },
  closed,
);
export type SearchAgentsArgs = Static<typeof SearchAgentsArgs>;

export const GetAgentArgs = Type.Object(Address, closed);
export type GetAgentArgs = Static<typeof GetAgentArgs>;

export const ResolveNameArgs = Type.Object({ name: AgentName }, closed);
export type ResolveNameArgs = Static<typeof ResolveNameArgs>;

export const AgentActivityArgs = Type.Object(
  {
    ...Address,
    kind: Type.Optional(
      Type.String({
        maxLength: 200,
        description:
          'kinds or groups of entries, comma-separated (as the activity API takes them; `failure` for what went wrong)',
      }),
    ),
    limit: Type.Optional(BoundedInteger({ minimum: 1, maximum: 200, default: 50 })),
  },
  closed,
);
export type AgentActivityArgs = Static<typeof AgentActivityArgs>;

export const DeliveryTraceArgs = Type.Object(
  {
    ...Address,
    message_id: Type.Optional(
      WireString('uuid', {
        description: 'one message’s id (its envelope session/uuid); left out: the latest events',
      }),
    ),
    limit: Type.Optional(BoundedInteger({ minimum: 1, maximum: 200, default: 50 })),
  },
  closed,
);
export type DeliveryTraceArgs = Static<typeof DeliveryTraceArgs>;

export const ChatWithAgentArgs = Type.Object(
  {
    agent: Type.Optional(AgentName),
    text: Type.String({ minLength: 1, maxLength: CHAT_TEXT_MAX_LENGTH }),
    session_id: Type.Optional(
      WireString('uuid', {
        description: 'a session this tool answered before, to continue the conversation',
      }),
    ),
    timeout_seconds: Type.Optional(
      BoundedInteger({
        minimum: 1,
        maximum: 300,
        default: 30,
        description: 'how long to wait for the reply',
      }),
    ),
  },
  closed,
);
export type ChatWithAgentArgs = Static<typeof ChatWithAgentArgs>;

export const SendMessageArgs = Type.Object(
  {
    to: AgentName,
    schema_digest: Type.String({
      pattern: '^model:[0-9a-f]{64}$',
      description: 'the message model’s digest (model:…), as uAgents computes it',
    }),
    protocol_digest: Type.Optional(
      Type.String({ pattern: '^proto:[0-9a-f]{64}$', description: 'the protocol’s digest' }),
    ),
    payload: Type.Record(Type.String(), Type.Unknown(), {
      description: 'the message, as the model’s JSON object',
    }),
  },
  closed,
);
export type SendMessageArgs = Static<typeof SendMessageArgs>;

const CodeFile = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255 }),
    value: Type.String(),
    language: Type.Optional(Type.String({ maxLength: 32 })),
  },
  closed,
);

const Code = {
  code: Type.Optional(Type.String({ maxLength: 1_048_576, description: 'the whole of agent.py' })),
  files: Type.Optional(
    Type.Array(CodeFile, {
      minItems: 1,
      maxItems: 50,
      description: 'the files of the agent, one named agent.py (instead of `code`)',
    }),
  ),
};

export const CreateHostedAgentArgs = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 32 }),
    network: Type.Optional(StringEnum(AGENT_NETWORKS, { description: 'testnet unless told' })),
    readme: Type.Optional(Type.String({ maxLength: 100_000 })),
    ...Code,
  },
  closed,
);
export type CreateHostedAgentArgs = Static<typeof CreateHostedAgentArgs>;

export const PutHostedCodeArgs = Type.Object({ ...Address, ...Code }, closed);
export type PutHostedCodeArgs = Static<typeof PutHostedCodeArgs>;

export const SetHostedSecretArgs = Type.Object(
  {
    ...Address,
    name: Type.String({
      pattern: '^[A-Za-z_][A-Za-z0-9_]{0,127}$',
      description: 'the variable the agent reads it from',
    }),
    secret: Type.String({ maxLength: 65_536 }),
  },
  closed,
);
export type SetHostedSecretArgs = Static<typeof SetHostedSecretArgs>;

export const StartHostedAgentArgs = Type.Object(
  {
    ...Address,
    wait_seconds: Type.Optional(
      BoundedInteger({
        maximum: 120,
        default: 20,
        description: 'how long to wait for it to run (0: do not wait)',
      }),
    ),
  },
  closed,
);
export type StartHostedAgentArgs = Static<typeof StartHostedAgentArgs>;

export const HostedAgentArgs = Type.Object(Address, closed);
export type HostedAgentArgs = Static<typeof HostedAgentArgs>;

export const HostedLogsArgs = Type.Object(
  {
    ...Address,
    level: Type.Optional(
      StringEnum(LOG_LEVELS, { description: 'the least level shown; left out: all' }),
    ),
  },
  closed,
);
export type HostedLogsArgs = Static<typeof HostedLogsArgs>;

/**
 * What the transport answers where the protocol names a JSON-RPC error (a body that is not
 * JSON-RPC, a session that is not one); the HTTP layer's own refusals (credentials, limits)
 * answer `{detail}` as everywhere.
 */
export const McpErrorAnswer = Type.Union([
  Type.Object({
    jsonrpc: Type.Literal('2.0'),
    error: Type.Object({ code: Type.Integer(), message: Type.String() }),
    id: Type.Null(),
  }),
  Type.Object({ detail: Type.String() }),
]);

/** An MCP client's session, as its owner sees it (`GET /v2/mcp/sessions`). */
export const McpSession = Type.Object({
  id: Type.String({ description: 'the Mcp-Session-Id' }),
  client_name: Nullable(Type.String({ description: 'what the client called itself' })),
  client_version: Nullable(Type.String()),
  protocol_version: Type.String({ description: 'the MCP version the client asked for' }),
  key_id: Type.String({ description: 'the API key it was opened with (every request carries it)' }),
  created_at: Timestamp,
  last_seen_at: Timestamp,
});
export type McpSession = Static<typeof McpSession>;

export const McpSessionParams = Type.Object({ id: WireString('uuid') });
