import type { StoredAgent } from '../store/repositories/agents.js';
import type { AgentStatusName } from '../wire/activity.js';
import type { AgentRecord } from '../wire/agents.js';
import { isoTimestamp } from '../wire/common.js';

/** What an agent's presence says now (the activity service's `statuses`). */
export interface StatusNow {
  status: AgentStatusName;
  reason: string | null;
  lastSeen: number | null;
}

/**
 * An agent as the API shows it to its owner: the stored listing, times as ISO-8601, and its
 * status now.
 */
export function agentRecord(agent: StoredAgent, now: StatusNow): AgentRecord {
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
    keep_failed_forwards: agent.keep_failed_forwards,
    mailbox: agent.mailbox,
    registered_at: isoTimestamp(agent.registered_at),
    updated_at: isoTimestamp(agent.updated_at),
    status: {
      status: now.status,
      last_seen: now.lastSeen === null ? null : isoTimestamp(now.lastSeen),
      reason: now.reason,
    },
  };
}
