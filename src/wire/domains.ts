import { Type, type Static } from '@sinclair/typebox';
import { AgentAddress, Nullable, StringEnum } from './common.js';
import { DOMAIN_NAME_PATTERN } from './domain-name.js';

// Names (domains) such as alice.agent: resolution by uAgents' NameServiceResolver, availability,
// and the names a user owns. Shapes follow the models uAgents validates the answers with.

const DomainName = Type.String({
  pattern: DOMAIN_NAME_PATTERN,
  description: 'lower-case labels separated by dots, such as alice.agent',
});

export const DomainNameParams = Type.Object({ name: DomainName });
export const DomainPathParams = Type.Object({ domain_name: DomainName });

const AgentWeight = Type.Object({
  address: AgentAddress,
  weight: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1 }),
});

export const Domain = Type.Object({
  name: Type.String(),
  status: StringEnum(['Registered', 'Pending', 'Checking', 'Updating', 'Deleting', 'Failed']),
  expiry: Nullable(Type.String({ description: 'names on this service do not expire' })),
  assigned_agents: Type.Array(Type.Object({ address: Type.String(), weight: Type.Integer() })),
});
export type Domain = Static<typeof Domain>;

export const DomainList = Type.Array(Domain);

export const DomainCreate = Type.Object({
  domain_name: DomainName,
  agent_records: Type.Optional(Type.Array(AgentWeight, { maxItems: 100 })),
});

export const DomainUpdate = Type.Object({
  agent_records: Type.Optional(Type.Array(AgentWeight, { maxItems: 100 })),
});

export const DomainListQuery = Type.Object({ agent_address: Type.Optional(AgentAddress) });

export const NameAvailabilityQuery = Type.Object({ name: DomainName });
export const NameAvailability = Type.Object({ name: Type.String(), available: Type.Boolean() });
