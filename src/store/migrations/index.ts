import type { Migration } from 'kysely';
import * as foundation from './0001_foundation.js';
import * as registry from './0002_registry.js';
import * as mailbox from './0003_mailbox.js';
import * as almanac from './0004_almanac.js';
import * as userStorage from './0005_user_storage.js';
import * as search from './0006_search.js';
import * as domains from './0007_domains.js';
import * as deliveries from './0008_deliveries.js';
import * as console from './0009_console.js';
import * as replays from './0010_replays.js';
import * as quarantine from './0011_quarantine.js';
import * as pollTrace from './0012_poll_trace.js';
import * as activity from './0013_activity.js';
import * as keptForwards from './0014_kept_forwards.js';
import * as webhooks from './0015_webhooks.js';
import * as timelineKinds from './0016_timeline_kinds.js';
import * as v1Tokens from './0017_v1_tokens.js';
import * as teams from './0018_teams.js';
import * as storageAssets from './0019_storage_assets.js';
import * as searchFeedback from './0020_search_feedback.js';
import * as enrolmentAndKeyScopes from './0021_enrolment_and_key_scopes.js';
import * as hosting from './0022_hosting.js';
import * as tenancy from './0023_tenancy.js';
import * as chat from './0024_chat.js';
import * as forwardOutages from './0025_forward_outages.js';
import * as presencePolls from './0026_presence_polls.js';
import * as agentProbes from './0027_agent_probes.js';
import * as uniqueEnrolmentHandles from './0028_unique_enrolment_handles.js';
import * as hostedFailures from './0029_hosted_failures.js';
import * as mcpSessions from './0030_mcp_sessions.js';
import * as crashLoops from './0031_crash_loops.js';
import * as a2a from './0032_a2a.js';
import * as federation from './0033_federation.js';
import * as servers from './0034_servers.js';
import * as webhookExchanges from './0035_webhook_exchanges.js';
import * as manifestLookups from './0036_manifest_lookups.js';
import * as usageDays from './0037_usage_days.js';
import * as protocolIndexByAgent from './0038_protocol_index_by_agent.js';
import * as protocolIndexByDigest from './0039_protocol_index_by_digest.js';

/**
 * Every migration, in order. Names sort lexically; add new ones at the end with the next
 * number. Both dialects run the same list.
 */
export const migrations: Record<string, Migration> = {
  '0001_foundation': foundation,
  '0002_registry': registry,
  '0003_mailbox': mailbox,
  '0004_almanac': almanac,
  '0005_user_storage': userStorage,
  '0006_search': search,
  '0007_domains': domains,
  '0008_deliveries': deliveries,
  '0009_console': console,
  '0010_replays': replays,
  '0011_quarantine': quarantine,
  '0012_poll_trace': pollTrace,
  '0013_activity': activity,
  '0014_kept_forwards': keptForwards,
  '0015_webhooks': webhooks,
  '0016_timeline_kinds': timelineKinds,
  '0017_v1_tokens': v1Tokens,
  '0018_teams': teams,
  '0019_storage_assets': storageAssets,
  '0020_search_feedback': searchFeedback,
  '0021_enrolment_and_key_scopes': enrolmentAndKeyScopes,
  '0022_hosting': hosting,
  '0023_tenancy': tenancy,
  '0024_chat': chat,
  '0025_forward_outages': forwardOutages,
  '0026_presence_polls': presencePolls,
  '0027_agent_probes': agentProbes,
  '0028_unique_enrolment_handles': uniqueEnrolmentHandles,
  '0029_hosted_failures': hostedFailures,
  '0030_mcp_sessions': mcpSessions,
  '0031_crash_loops': crashLoops,
  '0032_a2a': a2a,
  '0033_federation': federation,
  '0034_servers': servers,
  '0035_webhook_exchanges': webhookExchanges,
  '0036_manifest_lookups': manifestLookups,
  '0037_usage_days': usageDays,
  '0038_protocol_index_by_agent': protocolIndexByAgent,
  '0039_protocol_index_by_digest': protocolIndexByDigest,
};
