import type { StoredAgent } from '../../store/repositories/agents.js';
import type { AgentRecord } from '../../wire/agents.js';
import { isoTimestamp } from '../../wire/common.js';

/** An agent as the API shows it to its owner: the stored listing, times as ISO-8601. */
export function agentRecord(agent: StoredAgent): AgentRecord {
  return {
    address: agent.address,
    name: agent.name,
    handle: agent.handle,
    redirect_url: agent.redirect_url,
    agent_type: agent.agent_type,
    profile: agent.profile,
    endpoints: agent.endpoints,
    protocols: agent.protocols,
    metadata: agent.metadata,
    mailbox: agent.mailbox,
    registered_at: isoTimestamp(agent.registered_at),
    updated_at: isoTimestamp(agent.updated_at),
  };
}
