import type { AlmanacEntry } from '../services/almanac.js';
import type { AlmanacAgent } from '../wire/almanac.js';
import { isoTimestamp } from '../wire/common.js';

/** What `GET /v1/almanac/agents/{address}` answers; uAgents resolves from it. */
export function almanacAgent(entry: AlmanacEntry): AlmanacAgent {
  return {
    address: entry.address,
    status: entry.active ? 'active' : 'inactive',
    type: entry.type,
    endpoints: entry.endpoints,
    protocols: entry.protocols,
    metadata: entry.metadata,
    domain_name: entry.domainName,
    expiry: isoTimestamp(entry.expiresAt),
  };
}
