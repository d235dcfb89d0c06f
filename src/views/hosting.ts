import type { Static } from '@sinclair/typebox';
import type {
  HostedAgentInfo,
  HostedCode,
  HostedLogEntry,
  HostingStatus as HostingStatusInfo,
  SecretInfo,
} from '../services/hosting/index.js';
import { isoTimestamp } from '../wire/common.js';
import type {
  AgentCode,
  AgentLog,
  AgentSummaryV1,
  AgentV1,
  HostingStatus,
  PublicAgentV1,
  Secret,
} from '../wire/hosting.js';

/** The mask every secret's value is shown as: a secret is never answered. */
const MASKED_SECRET = '********';

/** `running` as the hosted service means it: started by its owner, and not given up on. */
function running(agent: HostedAgentInfo): boolean {
  return agent.desiredState === 'running' && agent.state !== 'failed';
}

/** Whether the code compiled: known once it runs (true) or once it failed (false). */
function compiled(agent: HostedAgentInfo): boolean | null {
  if (agent.codeDigest === null) return null;
  if (agent.state === 'failed') return false;
  return agent.state === 'running' ? true : null;
}

const nonEmpty = (text: string): string | null => (text === '' ? null : text);

export function agentSummaryView(agent: HostedAgentInfo): Static<typeof AgentSummaryV1> {
  return {
    name: agent.name,
    address: agent.address,
    domain: null,
    prefix: agent.network === 'mainnet' ? 'agent' : 'test-agent',
    running: running(agent),
    compiled: compiled(agent),
    code_digest: agent.codeDigest,
    wallet_address: null,
    code_update_timestamp: agent.codeUpdatedAt === null ? null : isoTimestamp(agent.codeUpdatedAt),
    creation_timestamp: isoTimestamp(agent.createdAt),
    avatar_url: nonEmpty(agent.profile.avatar_url),
    state: agent.state,
    state_reason: agent.stateReason,
  };
}

/** A hosted agent as its owner sees it: never its seed. */
export function agentV1View(agent: HostedAgentInfo): AgentV1 {
  return {
    ...agentSummaryView(agent),
    maintainer_id: agent.ownerId,
    revision: agent.revision,
    readme: nonEmpty(agent.profile.readme),
    short_description: nonEmpty(agent.profile.description),
    metadata: null,
    network: agent.network,
    restarts: agent.restarts,
    state_changed_timestamp: isoTimestamp(agent.stateChangedAt),
  };
}

export function publicAgentView(
  agent: HostedAgentInfo & { authorName: string },
): Static<typeof PublicAgentV1> {
  return {
    name: agent.name,
    author_username: agent.authorName,
    address: agent.address,
    domain: null,
    prefix: agent.network === 'mainnet' ? 'agent' : 'test-agent',
    running: running(agent),
    readme: nonEmpty(agent.profile.readme),
    short_description: nonEmpty(agent.profile.description),
    last_updated_at: isoTimestamp(agent.updatedAt),
    created_at: isoTimestamp(agent.createdAt),
    maintainer_id: agent.ownerId,
    avatar_url: nonEmpty(agent.profile.avatar_url),
    metadata: null,
  };
}

export function agentCodeView(code: HostedCode): Static<typeof AgentCode> {
  return {
    digest: code.digest,
    code: code.code,
    timestamp: code.updatedAt === null ? null : isoTimestamp(code.updatedAt),
  };
}

export function agentLogView(line: HostedLogEntry): Static<typeof AgentLog> {
  return {
    log_timestamp: isoTimestamp(line.time),
    log_entry: line.entry,
    log_type: line.type,
    log_level: line.level,
  };
}

/** A secret as its owner sees it: its name and when it was set, the value masked. */
export function secretView(secret: SecretInfo): Static<typeof Secret> {
  return {
    name: secret.name,
    secret: MASKED_SECRET,
    timestamp: isoTimestamp(secret.createdAt),
    address: secret.address,
  };
}

export function hostingStatusView(status: HostingStatusInfo): Static<typeof HostingStatus> {
  return {
    ready: status.ready,
    runners: status.runners,
    python: status.python ?? null,
    reason: status.reason ?? null,
    enable: status.enable ?? null,
  };
}
