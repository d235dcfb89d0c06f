import type { DomainWithAgents } from '../store/repositories/domains.js';
import type { Domain } from '../wire/domains.js';

/** A name with its agents; names on this service are registered at once and never expire. */
export function domainView(domain: DomainWithAgents): Domain {
  return {
    name: domain.name,
    status: 'Registered',
    expiry: null,
    assigned_agents: domain.agents,
  };
}
