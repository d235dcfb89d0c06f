import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadConfig } from '../../src/config/index.js';
import { envelopeDigest, type EnvelopeFields } from '../../src/crypto/index.js';
import { messageUuid } from '../../src/services/mailbox.js';
import { CHAT_PROTOCOL_DIGEST } from '../../src/wire/chat.js';
import type { DeliveryEventView } from '../../src/wire/deliveries.js';
import { hostOf, newRegisteredAgent, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call, type CallOptions } from '../kit/http.js';
import { callTool, mcpClient, textOf } from '../kit/mcp.js';
import { openStream } from '../kit/sse.js';
import { startEndpoint } from '../kit/loopback.js';
import { startSampleA2aAgent, type SampleAgent } from '../kit/a2a-sample-agent.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/**
 * Who may call each operation of the OpenAPI document. Every operation must be listed (the
 * first test fails otherwise), so that a new endpoint joins these tests when it is added.
 *
 * - `public`: anyone; credentials are ignored or only widen what is allowed;
 * - `user`: any user's API key, about the caller's own things;
 * - `owner`: the API key of the user who owns what the path names (another user: 404, as
 *   for nothing at all: whether it exists is the owner's business);
 * - `name-owner`: the same for a name, whose existence the Almanac makes public (another
 *   user: 403, it belongs to someone else);
 * - `owner-or-agent`: that, or the attestation of the agent the path names;
 * - `owner-or-granted-agent`: the owner's key, or the attestation of an agent the owner let
 *   reach the thing the path names (a storage asset's uploader, or an agent it is shared
 *   with); any other agent: 404, as for another user;
 * - `user-or-agent`: any user's API key, or the attestation of the agent the body names (an
 *   agent registering itself);
 * - `user-or-any-agent`: any user's API key or any agent's attestation, about the caller's own
 *   things (the storage assets an agent makes);
 * - `agent`: only an agent's attestation, for the agent the body names;
 * - `agent-token`: only a v1 mailroom access token, for the agent it was issued to;
 * - `peer`: only the attestation of a peer instance (AGENTRY_PEERS, docs/federation.md); any
 *   other agent: 404, as for nothing at all.
 *
 * Scoped keys (read-only, limited to agents) are held to the same list: a read-only key is
 * refused every operation but GET and HEAD, a key limited to agents every operation that is
 * not about one of them.
 */
type Rule =
  | 'public'
  | 'user'
  | 'owner'
  | 'name-owner'
  | 'owner-or-agent'
  | 'owner-or-granted-agent'
  | 'user-or-agent'
  | 'user-or-any-agent'
  | 'agent'
  | 'agent-token'
  | 'peer';

const RULES: Record<string, Rule> = {
  'GET /health': 'public',
  'GET /ready': 'public',
  'GET /v2/identity/{address}/challenge': 'user',
  'POST /v2/identity': 'user',
  'GET /v2/agents': 'user',
  'POST /v2/agents': 'user-or-agent',
  'POST /v2/agents/batch': 'user',
  'GET /v2/agents/{address}': 'owner-or-agent',
  'PUT /v2/agents/{address}': 'owner-or-agent',
  'DELETE /v2/agents/{address}': 'owner',
  'POST /v2/enrolments': 'user',
  'GET /v2/enrolments': 'user',
  'DELETE /v2/enrolments/{address}': 'owner',
  'GET /v2/agents/usage/current': 'user',
  'POST /v2/agents/mailbox/submit': 'public',
  'GET /v2/agents/mailbox/submit': 'public',
  'HEAD /v2/agents/mailbox/submit': 'public',
  'GET /v2/agents/{address}/mailbox': 'owner-or-agent',
  'GET /v2/agents/{address}/mailbox/{uuid}': 'owner-or-agent',
  'DELETE /v2/agents/{address}/mailbox/{uuid}': 'owner-or-agent',
  'GET /v2/agents/{address}/mailbox/quarantine': 'owner',
  'DELETE /v2/agents/{address}/mailbox/quarantine/{uuid}': 'owner',
  'POST /v2/agents/proxy/submit': 'public',
  'GET /v2/agents/proxy/submit': 'public',
  'HEAD /v2/agents/proxy/submit': 'public',
  'POST /v2/agents/interactions': 'agent',
  'GET /v2/agents/{address}/deliveries': 'owner',
  'GET /v2/agents/{address}/deliveries/{uuid}': 'owner',
  'GET /v2/deliveries': 'user',
  'POST /v1/events': 'agent',
  'GET /v2/agents/{address}/activity': 'owner',
  'GET /v2/activity': 'user',
  'GET /v2/agents/{address}/activity/stream': 'owner',
  'GET /v2/activity/stream': 'user',
  'GET /v2/agents/{address}/activity/stats': 'owner',
  'GET /v2/agents/{address}/probes': 'owner',
  'PUT /v2/agents/{address}/probes': 'owner',
  'DELETE /v2/agents/{address}/probes': 'owner',
  'POST /v2/webhooks': 'user',
  'GET /v2/webhooks': 'user',
  'GET /v2/webhooks/{id}': 'owner',
  'PUT /v2/webhooks/{id}': 'owner',
  'DELETE /v2/webhooks/{id}': 'owner',
  'GET /v2/webhooks/{id}/deliveries': 'owner',
  'POST /v2/webhooks/{id}/test': 'owner',
  'POST /v2/webhooks/{id}/deliveries/{delivery}/redeliver': 'owner',
  'POST /v1/almanac/agents': 'public',
  'POST /v1/almanac/agents/batch': 'public',
  'POST /v1/almanac/agents/{address}/status': 'public',
  'GET /v1/almanac/agents/{address}': 'public',
  'POST /v1/almanac/manifests': 'public',
  'GET /v1/almanac/manifests/protocols/{digest}': 'public',
  'POST /v2/almanac/manifest': 'public',
  'GET /v2/almanac/manifest/{digest}': 'public',
  'GET /v2/almanac/manifest/name/{name}': 'public',
  'GET /v2/almanac/manifest/model/{digest}': 'public',
  'POST /v1/almanac/search': 'public',
  'GET /v1/almanac/recent': 'public',
  'GET /v1/almanac/domains/{name}': 'public',
  'GET /v1/almanac/search/available_name': 'public',
  'POST /v1/almanac/handles/available': 'public',
  'GET /v2/almanac/handles/{handle}/available': 'public',
  'GET /v2/almanac/handles/{handle}/generate': 'public',
  'GET /v2/almanac/resolve/{id}': 'public',
  'GET /v2/users/domains': 'user',
  'POST /v2/users/domains': 'user',
  'PUT /v2/users/domains/{domain_name}': 'name-owner',
  'DELETE /v2/users/domains/{domain_name}': 'name-owner',
  'POST /v1/search/agents': 'public',
  'POST /v1/search': 'public',
  'POST /v1/search/geo': 'public',
  'POST /v1/search/agents/geo': 'public',
  'GET /v1/search/agents/tags': 'public',
  'POST /v1/search/agents/click': 'public',
  'GET /v1/search/agents/{address}': 'public',
  'POST /v2/session': 'public',
  'GET /v2/session': 'user',
  'DELETE /v2/session': 'public',
  'GET /v2/api-keys': 'user',
  'POST /v2/api-keys': 'user',
  'DELETE /v2/api-keys/{id}': 'owner',
  'GET /v2/agents/usage/history': 'user',
  'POST /v1/auth/challenge': 'public',
  'POST /v1/auth/prove': 'public',
  'GET /v1/mailbox': 'agent-token',
  'DELETE /v1/mailbox': 'agent-token',
  'GET /v1/mailbox/{uuid}': 'agent-token',
  'DELETE /v1/mailbox/{uuid}': 'agent-token',
  'POST /v1/agents': 'user',
  'GET /v1/agents': 'user',
  'GET /v1/agents/{address}': 'owner',
  'PUT /v1/agents/{address}': 'owner',
  'DELETE /v1/agents/{address}': 'owner',
  'POST /v1/submit': 'public',
  'GET /v1/submit': 'public',
  'HEAD /v1/submit': 'public',
  'POST /v1/proxy/submit': 'public',
  'GET /v1/proxy/submit': 'public',
  'HEAD /v1/proxy/submit': 'public',
  'GET /v1/proxy/resolve/{agent_address}': 'public',
  'PUT /v1/storage/assets/delegations/{agent_address}': 'user',
  'DELETE /v1/storage/assets/delegations/{agent_address}': 'user',
  'GET /v1/storage/assets/delegations/': 'user',
  'POST /v1/storage/assets/': 'user-or-any-agent',
  'GET /v1/storage/assets/': 'user',
  'GET /v1/storage/assets/{asset_id}/': 'owner-or-granted-agent',
  'DELETE /v1/storage/assets/{asset_id}/': 'owner-or-granted-agent',
  'GET /v1/storage/assets/{asset_id}/contents/': 'owner-or-granted-agent',
  'GET /v1/storage/{asset_id}': 'owner-or-granted-agent',
  'PUT /v1/storage/assets/{asset_id}/contents/': 'owner-or-granted-agent',
  'GET /v1/storage/assets/{asset_id}/permissions/': 'owner-or-granted-agent',
  'PUT /v1/storage/assets/{asset_id}/permissions/': 'owner-or-granted-agent',
  'DELETE /v1/storage/assets/{asset_id}/permissions/': 'owner-or-granted-agent',
  'GET /v2/teams': 'user',
  'POST /v2/teams': 'user',
  'GET /v2/teams/{slug}': 'owner',
  'DELETE /v2/teams/{slug}': 'owner',
  'POST /v2/teams/{slug}/members': 'owner',
  'PUT /v2/teams/{slug}/members/{user}': 'owner',
  'DELETE /v2/teams/{slug}/members/{user}': 'owner',
  'GET /v1/hosting/status': 'user',
  'GET /v1/hosting/agents': 'user',
  'GET /v1/hosting/teams/{slug}/agents': 'owner',
  'POST /v1/hosting/agents': 'user',
  'POST /v1/hosting/teams/{slug}/agents': 'owner',
  'GET /v1/hosting/agents/{address}/profile': 'owner',
  'GET /v1/hosting/teams/{slug}/agents/{address}/profile': 'owner',
  'GET /v1/hosting/agents/{address}': 'owner',
  'GET /v1/hosting/teams/{slug}/agents/{address}': 'owner',
  'PUT /v1/hosting/agents/{address}': 'owner',
  'PUT /v1/hosting/teams/{slug}/agents/{address}': 'owner',
  'DELETE /v1/hosting/agents/{address}': 'owner',
  'DELETE /v1/hosting/teams/{slug}/agents/{address}': 'owner',
  'POST /v1/hosting/agents/{address}/duplicate': 'owner',
  'POST /v1/hosting/teams/{slug}/agents/{address}/duplicate': 'owner',
  'GET /v1/hosting/agents/{address}/code': 'owner',
  'GET /v1/hosting/teams/{slug}/agents/{address}/code': 'owner',
  'PUT /v1/hosting/agents/{address}/code': 'owner',
  'PUT /v1/hosting/teams/{slug}/agents/{address}/code': 'owner',
  'GET /v1/hosting/agents/{address}/storage': 'owner',
  'GET /v1/hosting/teams/{slug}/agents/{address}/storage': 'owner',
  'GET /v1/hosting/agents/{address}/storage/{key}': 'owner',
  'GET /v1/hosting/teams/{slug}/agents/{address}/storage/{key}': 'owner',
  'PUT /v1/hosting/agents/{address}/storage/{key}': 'owner',
  'PUT /v1/hosting/teams/{slug}/agents/{address}/storage/{key}': 'owner',
  'DELETE /v1/hosting/agents/{address}/storage/{key}': 'owner',
  'DELETE /v1/hosting/teams/{slug}/agents/{address}/storage/{key}': 'owner',
  'POST /v1/hosting/agents/{address}/start': 'owner',
  'POST /v1/hosting/teams/{slug}/agents/{address}/start': 'owner',
  'POST /v1/hosting/agents/{address}/stop': 'owner',
  'POST /v1/hosting/teams/{slug}/agents/{address}/stop': 'owner',
  'GET /v1/hosting/agents/{address}/logs/latest': 'owner',
  'GET /v1/hosting/teams/{slug}/agents/{address}/logs/latest': 'owner',
  'DELETE /v1/hosting/agents/{address}/logs': 'owner',
  'DELETE /v1/hosting/teams/{slug}/agents/{address}/logs': 'owner',
  'PUT /v1/hosting/agents/{address}/network': 'owner',
  'PUT /v1/hosting/teams/{slug}/agents/{address}/network': 'owner',
  'GET /v1/hosting/secrets': 'user',
  'GET /v1/hosting/teams/{slug}/secrets': 'owner',
  'POST /v1/hosting/secrets': 'owner',
  'POST /v1/hosting/teams/{slug}/secrets': 'owner',
  'GET /v1/hosting/{address}/secrets': 'owner',
  'GET /v1/hosting/teams/{slug}/{address}/secrets': 'owner',
  'DELETE /v1/hosting/secrets/{address}/{name}': 'owner',
  'DELETE /v1/hosting/teams/{slug}/secrets/{address}/{name}': 'owner',
  'GET /v2/chat/identity': 'user',
  'POST /v2/chat/sessions': 'user',
  'GET /v2/chat/sessions': 'user',
  'GET /v2/chat/sessions/{id}': 'owner',
  'GET /v2/chat/sessions/{id}/messages': 'owner',
  'POST /v2/chat/sessions/{id}/messages': 'owner',
  'POST /v2/chat/sessions/{id}/end': 'owner',
  'GET /v2/chat/sessions/{id}/stream': 'owner',
  'POST /mcp': 'user',
  'DELETE /mcp': 'user',
  'GET /mcp': 'user',
  'GET /v2/mcp/sessions': 'user',
  'DELETE /v2/mcp/sessions/{id}': 'owner',
  // A2A: the owner's setting; the cards and endpoints of the agents served, to anyone for a
  // public agent and to any user's key for a private one (the A2A test below).
  'GET /v2/agents/{address}/a2a': 'owner',
  'PUT /v2/agents/{address}/a2a': 'owner',
  'GET /.well-known/agent-cards.json': 'public',
  'GET /a2a/{address}/.well-known/agent-card.json': 'public',
  'POST /a2a/{address}': 'public',
  // External A2A agents (docs/a2a.md, "Inward").
  'POST /v2/a2a/external-agents': 'user',
  'GET /v2/a2a/external-agents': 'user',
  'GET /v2/a2a/external-agents/{address}': 'owner',
  'POST /v2/a2a/external-agents/{address}/refresh': 'owner',
  'DELETE /v2/a2a/external-agents/{address}': 'owner',
  // Federation: the instance's status to anyone; publishing to the owner; what peers ask, to
  // peers alone (the federation test below, and test/http/federation.test.ts).
  'GET /v2/federation': 'public',
  'GET /v2/federation/health': 'user-or-any-agent',
  'GET /v2/agents/{address}/federation': 'owner',
  'PUT /v2/agents/{address}/federation': 'owner',
  'GET /v2/federation/agents/{address}': 'peer',
  'POST /v2/federation/search': 'peer',
  'GET /v2/federation/search': 'user',
};

/**
 * What each operation a user's key may call is about, for keys limited to agents
 * (docs/keys.md). Every such operation must be listed (a test fails otherwise).
 *
 * - `path`: the agent its path names: a key limited to that agent may call it;
 * - `body`: the agent its body's `address` names, likewise;
 * - `none`: the owner's things as a whole, or no one agent: a key limited to agents is refused,
 *   whatever its body says;
 * - `narrower-key`: makes a key: a key limited to agents may, for a key limited to some of
 *   them;
 * - `anyone`: takes no credential: a scoped key is answered as anyone is;
 * - `each-call`: carries calls of its own (the MCP endpoint): each tool call is held to the
 *   key's scope as an operation is (the MCP test below).
 */
type Subject = 'path' | 'body' | 'none' | 'narrower-key' | 'anyone' | 'each-call';

const SUBJECTS: Record<string, Subject> = {
  'GET /health': 'anyone',
  'GET /ready': 'anyone',
  'GET /v2/identity/{address}/challenge': 'path',
  'POST /v2/identity': 'body',
  'GET /v2/agents': 'none',
  'POST /v2/agents': 'body',
  'POST /v2/agents/batch': 'none',
  'GET /v2/agents/{address}': 'path',
  'PUT /v2/agents/{address}': 'path',
  'DELETE /v2/agents/{address}': 'path',
  'POST /v2/enrolments': 'none',
  'GET /v2/enrolments': 'none',
  'DELETE /v2/enrolments/{address}': 'path',
  'GET /v2/agents/usage/current': 'none',
  'POST /v2/agents/mailbox/submit': 'none',
  'GET /v2/agents/mailbox/submit': 'anyone',
  'HEAD /v2/agents/mailbox/submit': 'anyone',
  'GET /v2/agents/{address}/mailbox': 'path',
  'GET /v2/agents/{address}/mailbox/{uuid}': 'path',
  'DELETE /v2/agents/{address}/mailbox/{uuid}': 'path',
  'GET /v2/agents/{address}/mailbox/quarantine': 'path',
  'DELETE /v2/agents/{address}/mailbox/quarantine/{uuid}': 'path',
  'POST /v2/agents/proxy/submit': 'none',
  'GET /v2/agents/proxy/submit': 'anyone',
  'HEAD /v2/agents/proxy/submit': 'anyone',
  'GET /v2/agents/{address}/deliveries': 'path',
  'GET /v2/agents/{address}/deliveries/{uuid}': 'path',
  'GET /v2/deliveries': 'none',
  'GET /v2/agents/{address}/activity': 'path',
  'GET /v2/activity': 'none',
  'GET /v2/agents/{address}/activity/stream': 'path',
  'GET /v2/activity/stream': 'none',
  'GET /v2/agents/{address}/activity/stats': 'path',
  'GET /v2/agents/{address}/probes': 'path',
  'PUT /v2/agents/{address}/probes': 'path',
  'DELETE /v2/agents/{address}/probes': 'path',
  'POST /v2/webhooks': 'none',
  'GET /v2/webhooks': 'none',
  'GET /v2/webhooks/{id}': 'none',
  'PUT /v2/webhooks/{id}': 'none',
  'DELETE /v2/webhooks/{id}': 'none',
  'GET /v2/webhooks/{id}/deliveries': 'none',
  'POST /v2/webhooks/{id}/test': 'none',
  'POST /v2/webhooks/{id}/deliveries/{delivery}/redeliver': 'none',
  'POST /v1/almanac/agents': 'anyone',
  'POST /v1/almanac/agents/batch': 'anyone',
  'POST /v1/almanac/agents/{address}/status': 'anyone',
  'GET /v1/almanac/agents/{address}': 'anyone',
  'POST /v1/almanac/manifests': 'anyone',
  'GET /v1/almanac/manifests/protocols/{digest}': 'anyone',
  'POST /v2/almanac/manifest': 'anyone',
  'GET /v2/almanac/manifest/{digest}': 'anyone',
  'GET /v2/almanac/manifest/name/{name}': 'anyone',
  'GET /v2/almanac/manifest/model/{digest}': 'anyone',
  'POST /v1/almanac/search': 'anyone',
  'GET /v1/almanac/recent': 'anyone',
  'GET /v1/almanac/domains/{name}': 'anyone',
  'GET /v1/almanac/search/available_name': 'anyone',
  'POST /v1/almanac/handles/available': 'anyone',
  'GET /v2/almanac/handles/{handle}/available': 'anyone',
  'GET /v2/almanac/handles/{handle}/generate': 'anyone',
  'GET /v2/almanac/resolve/{id}': 'anyone',
  'GET /v2/users/domains': 'none',
  'POST /v2/users/domains': 'none',
  'PUT /v2/users/domains/{domain_name}': 'none',
  'DELETE /v2/users/domains/{domain_name}': 'none',
  'POST /v1/search/agents': 'anyone',
  'POST /v1/search': 'anyone',
  'POST /v1/search/geo': 'anyone',
  'POST /v1/search/agents/geo': 'anyone',
  'GET /v1/search/agents/tags': 'anyone',
  'POST /v1/search/agents/click': 'anyone',
  'GET /v1/search/agents/{address}': 'anyone',
  'POST /v2/session': 'anyone',
  'GET /v2/session': 'none',
  'DELETE /v2/session': 'anyone',
  'GET /v2/api-keys': 'none',
  'POST /v2/api-keys': 'narrower-key',
  'DELETE /v2/api-keys/{id}': 'none',
  'GET /v2/agents/usage/history': 'none',
  'POST /v1/auth/challenge': 'body',
  'POST /v1/auth/prove': 'anyone',
  'POST /v1/agents': 'body',
  'GET /v1/agents': 'none',
  'GET /v1/agents/{address}': 'path',
  'PUT /v1/agents/{address}': 'path',
  'DELETE /v1/agents/{address}': 'path',
  'POST /v1/submit': 'none',
  'GET /v1/submit': 'anyone',
  'HEAD /v1/submit': 'anyone',
  'POST /v1/proxy/submit': 'none',
  'GET /v1/proxy/submit': 'anyone',
  'HEAD /v1/proxy/submit': 'anyone',
  'GET /v1/proxy/resolve/{agent_address}': 'anyone',
  'PUT /v1/storage/assets/delegations/{agent_address}': 'path',
  'DELETE /v1/storage/assets/delegations/{agent_address}': 'path',
  'GET /v1/storage/assets/delegations/': 'none',
  'POST /v1/storage/assets/': 'none',
  'GET /v1/storage/assets/': 'none',
  'GET /v1/storage/assets/{asset_id}/': 'none',
  'DELETE /v1/storage/assets/{asset_id}/': 'none',
  'GET /v1/storage/assets/{asset_id}/contents/': 'none',
  'GET /v1/storage/{asset_id}': 'none',
  'PUT /v1/storage/assets/{asset_id}/contents/': 'none',
  'GET /v1/storage/assets/{asset_id}/permissions/': 'none',
  'PUT /v1/storage/assets/{asset_id}/permissions/': 'none',
  'DELETE /v1/storage/assets/{asset_id}/permissions/': 'none',
  'GET /v2/teams': 'none',
  'POST /v2/teams': 'none',
  'GET /v2/teams/{slug}': 'none',
  'DELETE /v2/teams/{slug}': 'none',
  'POST /v2/teams/{slug}/members': 'none',
  'PUT /v2/teams/{slug}/members/{user}': 'none',
  'DELETE /v2/teams/{slug}/members/{user}': 'none',
  'GET /v1/hosting/status': 'none',
  'GET /v1/hosting/agents': 'none',
  'GET /v1/hosting/teams/{slug}/agents': 'none',
  'POST /v1/hosting/agents': 'none',
  'POST /v1/hosting/teams/{slug}/agents': 'none',
  'GET /v1/hosting/agents/{address}/profile': 'path',
  'GET /v1/hosting/teams/{slug}/agents/{address}/profile': 'path',
  'GET /v1/hosting/agents/{address}': 'path',
  'GET /v1/hosting/teams/{slug}/agents/{address}': 'path',
  'PUT /v1/hosting/agents/{address}': 'path',
  'PUT /v1/hosting/teams/{slug}/agents/{address}': 'path',
  'DELETE /v1/hosting/agents/{address}': 'path',
  'DELETE /v1/hosting/teams/{slug}/agents/{address}': 'path',
  'POST /v1/hosting/agents/{address}/duplicate': 'path',
  'POST /v1/hosting/teams/{slug}/agents/{address}/duplicate': 'path',
  'GET /v1/hosting/agents/{address}/code': 'path',
  'GET /v1/hosting/teams/{slug}/agents/{address}/code': 'path',
  'PUT /v1/hosting/agents/{address}/code': 'path',
  'PUT /v1/hosting/teams/{slug}/agents/{address}/code': 'path',
  'GET /v1/hosting/agents/{address}/storage': 'path',
  'GET /v1/hosting/teams/{slug}/agents/{address}/storage': 'path',
  'GET /v1/hosting/agents/{address}/storage/{key}': 'path',
  'GET /v1/hosting/teams/{slug}/agents/{address}/storage/{key}': 'path',
  'PUT /v1/hosting/agents/{address}/storage/{key}': 'path',
  'PUT /v1/hosting/teams/{slug}/agents/{address}/storage/{key}': 'path',
  'DELETE /v1/hosting/agents/{address}/storage/{key}': 'path',
  'DELETE /v1/hosting/teams/{slug}/agents/{address}/storage/{key}': 'path',
  'POST /v1/hosting/agents/{address}/start': 'path',
  'POST /v1/hosting/teams/{slug}/agents/{address}/start': 'path',
  'POST /v1/hosting/agents/{address}/stop': 'path',
  'POST /v1/hosting/teams/{slug}/agents/{address}/stop': 'path',
  'GET /v1/hosting/agents/{address}/logs/latest': 'path',
  'GET /v1/hosting/teams/{slug}/agents/{address}/logs/latest': 'path',
  'DELETE /v1/hosting/agents/{address}/logs': 'path',
  'DELETE /v1/hosting/teams/{slug}/agents/{address}/logs': 'path',
  'PUT /v1/hosting/agents/{address}/network': 'path',
  'PUT /v1/hosting/teams/{slug}/agents/{address}/network': 'path',
  'GET /v1/hosting/secrets': 'none',
  'GET /v1/hosting/teams/{slug}/secrets': 'none',
  'POST /v1/hosting/secrets': 'body',
  'POST /v1/hosting/teams/{slug}/secrets': 'body',
  'GET /v1/hosting/{address}/secrets': 'path',
  'GET /v1/hosting/teams/{slug}/{address}/secrets': 'path',
  'DELETE /v1/hosting/secrets/{address}/{name}': 'path',
  'DELETE /v1/hosting/teams/{slug}/secrets/{address}/{name}': 'path',
  // A person's conversations are theirs as a whole: a key limited to agents speaks for none.
  'GET /v2/chat/identity': 'none',
  'POST /v2/chat/sessions': 'none',
  'GET /v2/chat/sessions': 'none',
  'GET /v2/chat/sessions/{id}': 'none',
  'GET /v2/chat/sessions/{id}/messages': 'none',
  'POST /v2/chat/sessions/{id}/messages': 'none',
  'POST /v2/chat/sessions/{id}/end': 'none',
  'GET /v2/chat/sessions/{id}/stream': 'none',
  'POST /mcp': 'each-call',
  'DELETE /mcp': 'each-call',
  'GET /mcp': 'each-call',
  'GET /v2/mcp/sessions': 'none',
  'DELETE /v2/mcp/sessions/{id}': 'none',
  'GET /v2/agents/{address}/a2a': 'path',
  'PUT /v2/agents/{address}/a2a': 'path',
  'GET /.well-known/agent-cards.json': 'anyone',
  'GET /a2a/{address}/.well-known/agent-card.json': 'path',
  'POST /a2a/{address}': 'each-call',
  // External A2A agents: registering and listing are about the owner’s things as a
  // whole; the others about the external agent the path names.
  'POST /v2/a2a/external-agents': 'none',
  'GET /v2/a2a/external-agents': 'none',
  'GET /v2/a2a/external-agents/{address}': 'path',
  'POST /v2/a2a/external-agents/{address}/refresh': 'path',
  'DELETE /v2/a2a/external-agents/{address}': 'path',
  'GET /v2/federation': 'anyone',
  'GET /v2/federation/health': 'none',
  'GET /v2/agents/{address}/federation': 'path',
  'PUT /v2/agents/{address}/federation': 'path',
  'GET /v2/federation/search': 'none',
};

/** A hosted agent's code, storage key and secret name, as the paths and bodies name them. */
const HOSTED_CODE = JSON.stringify([{ name: 'agent.py', value: 'print(1)', language: 'python' }]);
const HOSTED_KEY = 'hosted-key';
const HOSTED_SECRET = 'HOSTED_SECRET';

/** Hosting settings with a key: PostgreSQL keeps none by itself. */
function hostingWithKey() {
  return { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') };
}

/**
 * A call for the team its path names (`/v1/hosting/teams/{slug}/…`): the path, not `x-team`,
 * says whom it is for, so every member reaches the team's things with it.
 */
const forPathTeam = (operation: { path: string }) =>
  operation.path.startsWith('/v1/hosting/teams/{slug}');

interface Operation {
  method: string;
  path: string;
  rule: Rule;
}

async function operationsOf(t: TestServer): Promise<Operation[]> {
  const document = await call(t.url, 'GET', '/openapi.json');
  assert.equal(document.status, 200);
  const paths = document.body.paths as Record<string, Record<string, unknown>>;
  return Object.entries(paths).flatMap(([path, operations]) =>
    Object.keys(operations).map((method) => {
      const key = `${method.toUpperCase()} ${path}`;
      return { method: method.toUpperCase(), path, rule: RULES[key]! };
    }),
  );
}

describeOnEachDialect('authorization of every operation', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  let endpoint: Awaited<ReturnType<typeof startEndpoint>>;
  /** The external A2A agent the owners' external agents are registered from. */
  let sampleA2a: SampleAgent;
  let bobKey: string;
  let carolKey: string;
  let operations: Operation[];
  /** What one owner holds, named in the paths of the calls below. */
  interface Things {
    agent: TestIdentity;
    uuid: string;
    keyId: string;
    domain: string;
    redirectUrl: string;
    webhookId: string;
    /** A delivery of that webhook (its test). */
    webhookDeliveryId: string;
    assetId: string;
    /** A hosted agent, with code, a secret and a storage key. */
    hosted: string;
    /** A chat session with the owner's agent. */
    chatSession: string;
    /** An MCP session opened with the owner's key. */
    mcpSession: string;
    /** An external A2A agent registered by its card's URL. */
    external: string;
  }
  /** Alice's things. */
  const alice = {} as Things;
  /**
   * The things of Alice's team, made by Alice acting for it (`x-team`); Carol is a member,
   * Bob is not.
   */
  const TEAM = 'alice-team';
  const team = {} as Things;
  const asTeam = { 'x-team': TEAM };

  /** Makes an owner's things: an agent with a message waiting, a key, a name and a webhook. */
  async function makeThings(things: Things, tag: string, headers: Record<string, string>) {
    const key = t.userKey;
    things.redirectUrl = `${endpoint.url}/${tag}-only-path`;
    things.agent = TestIdentity.random();
    await registerAgent(hostOf(t), key, things.agent, {
      redirectUrl: things.redirectUrl,
      headers,
      // A chat agent, served over A2A to anyone.
      listing: { protocols: [CHAT_PROTOCOL_DIGEST] },
    });
    const a2a = await call(t.url, 'PUT', `/v2/agents/${things.agent.address}/a2a`, {
      key,
      headers,
      body: { access: 'public' },
    });
    assert.equal(a2a.status, 200, a2a.text);
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: things.agent.address, payloadJson: '{}' }),
    );
    assert.equal(
      (await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope })).status,
      200,
    );
    things.uuid = messageUuid(envelope);
    const made = await call(t.url, 'POST', '/v2/api-keys', { key, headers, body: {} });
    assert.equal(made.status, 200, made.text);
    things.keyId = made.body.id;
    things.domain = `${tag}-private.agent`;
    const domain = await call(t.url, 'POST', '/v2/users/domains', {
      key,
      headers,
      body: { domain_name: things.domain, agent_records: [{ address: things.agent.address }] },
    });
    assert.equal(domain.status, 201, domain.text);
    const webhook = await call(t.url, 'POST', '/v2/webhooks', {
      key,
      headers,
      body: { url: `${endpoint.url}/${tag}-only-path`, kinds: ['message.refused'] },
    });
    assert.equal(webhook.status, 201, webhook.text);
    things.webhookId = webhook.body.id;
    const tested = await call(t.url, 'POST', `/v2/webhooks/${things.webhookId}/test`, {
      key,
      headers,
    });
    assert.equal(tested.status, 200, tested.text);
    things.webhookDeliveryId = tested.body.id;
    const asset = await call(t.url, 'POST', '/v1/storage/assets/', {
      key,
      headers,
      body: { lifetime_hours: 24, contents: Buffer.from(`${tag}-only-path`).toString('base64') },
    });
    assert.equal(asset.status, 201, asset.text);
    things.assetId = asset.body.asset_id;
    const hosted = await call(t.url, 'POST', '/v1/hosting/agents', {
      key,
      headers,
      body: { name: `${tag} hosted` },
    });
    assert.equal(hosted.status, 200, hosted.text);
    things.hosted = hosted.body.address;
    const hostedCalls: [string, string, unknown][] = [
      ['PUT', `/agents/${things.hosted}/code`, { code: HOSTED_CODE }],
      ['PUT', `/agents/${things.hosted}/storage/${HOSTED_KEY}`, { value: `${tag}-only-path` }],
      ['POST', '/secrets', { address: things.hosted, name: HOSTED_SECRET, secret: 'x' }],
    ];
    for (const [method, path, body] of hostedCalls) {
      const res = await call(t.url, method, `/v1/hosting${path}`, { key, headers, body });
      assert.equal(res.status, 200, res.text);
    }
    const session = await call(t.url, 'POST', '/v2/chat/sessions', {
      key,
      headers,
      body: { agent: things.agent.address },
    });
    assert.equal(session.status, 201, session.text);
    things.chatSession = session.body.id;
    const mcp = await fetch(`${t.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...headers,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: `${tag}-only-path`, version: '1' },
        },
      }),
    });
    assert.equal(mcp.status, 200, await mcp.clone().text());
    things.mcpSession = mcp.headers.get('mcp-session-id')!;
    const external = await call(t.url, 'POST', '/v2/a2a/external-agents', {
      key,
      headers,
      body: { card_url: sampleA2a.cardUrl },
    });
    assert.equal(external.status, 201, external.text);
    things.external = external.body.address;
  }

  before(async () => {
    endpoint = await startEndpoint();
    sampleA2a = await startSampleA2aAgent();
    t = await startTestServer({
      dialect,
      clock,
      config: { allowPrivateTargets: true, hosting: hostingWithKey() },
    });
    bobKey = await t.addUser('bob');
    carolKey = await t.addUser('carol');
    operations = await operationsOf(t);
    await makeThings(alice, 'alice', {});
    const made = await call(t.url, 'POST', '/v2/teams', { key: t.userKey, body: { slug: TEAM } });
    assert.equal(made.status, 201, made.text);
    const added = await call(t.url, 'POST', `/v2/teams/${TEAM}/members`, {
      key: t.userKey,
      body: { user: 'carol' },
    });
    assert.equal(added.status, 201, added.text);
    await makeThings(team, 'team', asTeam);
  });
  after(async () => {
    await t.close();
    await endpoint.close();
    await sampleA2a.close();
  });

  /** Alice's things, or her team's for a call whose path names the team. */
  const thingsFor = (operation: Operation): Things => (forPathTeam(operation) ? team : alice);

  /** The operation's path with an owner's things in it (Alice's unless told). */
  function pathOf(operation: Operation, things: Things = alice): string {
    const hosting = operation.path.startsWith('/v1/hosting');
    const a2a = operation.path.startsWith('/v2/a2a/external-agents');
    return operation.path
      .replace('{address}', hosting ? things.hosted : a2a ? things.external : things.agent.address)
      .replace('{agent_address}', things.agent.address)
      .replace('{key}', HOSTED_KEY)
      .replace('{name}', hosting ? HOSTED_SECRET : things.domain)
      .replace('{uuid}', things.uuid)
      .replace('{asset_id}', things.assetId)
      .replace('{id}', idOf(operation.path, things))
      .replace('{delivery}', things.webhookDeliveryId)
      .replace('{domain_name}', things.domain)
      .replace('{slug}', TEAM)
      .replace('{user}', 'admin')
      .replace('{handle}', 'alice-handle')
      .replace('{digest}', 'proto:' + '0'.repeat(64));
  }

  function idOf(path: string, things: Things): string {
    if (path.startsWith('/v2/api-keys')) return things.keyId;
    if (path.startsWith('/v2/webhooks')) return things.webhookId;
    if (path.startsWith('/v2/chat/sessions')) return things.chatSession;
    if (path.startsWith('/v2/mcp/sessions')) return things.mcpSession;
    return 'alice';
  }

  /** A body that passes validation, so that what answers is the authorization. */
  function bodyOf(operation: Operation, things: Things = alice): unknown {
    if (
      (operation.method === 'PUT' && operation.path === '/v2/agents/{address}') ||
      (operation.method === 'POST' && operation.path === '/v2/agents')
    ) {
      return { address: things.agent.address, name: 'taken over' };
    }
    if (operation.method === 'PUT' && operation.path === '/v1/agents/{address}') {
      return { name: 'taken over' };
    }
    // Proofs of the owner's agent's key that pass validation (the challenge is none issued).
    const proof = {
      address: things.agent.address,
      challenge: 'c'.repeat(64),
      challenge_response: things.agent.signChallenge('c'.repeat(64)),
    };
    if (operation.method === 'POST' && operation.path === '/v2/identity') return proof;
    if (operation.method === 'POST' && operation.path === '/v1/agents') {
      return { ...proof, agent_type: 'mailbox' };
    }
    if (operation.method === 'POST' && operation.path === '/v1/auth/challenge') {
      return { address: things.agent.address };
    }
    if (operation.method === 'PUT' && operation.path.startsWith('/v2/users/domains')) {
      return { agent_records: [] };
    }
    if (operation.method === 'PUT' && operation.path.endsWith('/contents/')) {
      return { mime_type: 'text/plain', contents: 'dGFrZW4gb3Zlcg==' };
    }
    if (operation.method === 'PUT' && operation.path.endsWith('/permissions/')) {
      return { agent_address: TestIdentity.random().address, read: true, write: true };
    }
    if (operation.method === 'POST' && operation.path === '/v2/teams/{slug}/members') {
      return { user: 'bob', role: 'owner' };
    }
    if (operation.method === 'PUT' && operation.path === '/v2/teams/{slug}/members/{user}') {
      return { role: 'member' };
    }
    if (operation.method === 'PUT' && operation.path === '/v2/agents/{address}/a2a') {
      return { access: 'public' };
    }
    if (operation.method === 'PUT' && operation.path === '/v2/agents/{address}/federation') {
      return { published: false };
    }
    if (operation.method === 'POST' && operation.path === '/v2/federation/search') {
      return { search_text: 'taken over' };
    }
    if (operation.method === 'PUT' && operation.path === '/v2/agents/{address}/probes') {
      return { interval_seconds: 86_400 };
    }
    if (operation.method === 'POST' && operation.path === '/v2/chat/sessions') {
      return { agent: things.agent.address };
    }
    if (operation.method === 'POST' && operation.path === '/v2/chat/sessions/{id}/messages') {
      return { text: 'taken over' };
    }
    if (operation.method === 'POST' && operation.path === '/v2/a2a/external-agents') {
      return { card_url: sampleA2a.cardUrl };
    }
    if (operation.path.startsWith('/v1/hosting')) {
      const path = operation.path.replace('/v1/hosting/teams/{slug}', '/v1/hosting');
      const bodies: Record<string, unknown> = {
        'POST /v1/hosting/agents': { name: 'taken over' },
        'POST /v1/hosting/agents/{address}/duplicate': { name: 'taken over' },
        'PUT /v1/hosting/agents/{address}': { name: 'taken over' },
        'PUT /v1/hosting/agents/{address}/code': { code: HOSTED_CODE },
        'PUT /v1/hosting/agents/{address}/storage/{key}': { value: 'taken over' },
        'POST /v1/hosting/secrets': { address: things.hosted, name: 'TAKEN', secret: 'over' },
      };
      const body = bodies[`${operation.method} ${path}`];
      if (body !== undefined) return body;
    }
    return operation.method === 'GET' || operation.method === 'HEAD' ? undefined : {};
  }

  const send = (operation: Operation, options: CallOptions, things: Things = alice) =>
    call(t.url, operation.method, pathOf(operation, things), {
      body: bodyOf(operation, things),
      ...options,
    });

  it('has a rule for every operation of the OpenAPI document, and none for an operation gone', () => {
    const documented = new Set(operations.map(({ method, path }) => `${method} ${path}`));
    const unlisted = [...documented].filter((key) => RULES[key] === undefined);
    assert.deepEqual(unlisted, [], 'add each new operation to RULES');
    const gone = Object.keys(RULES).filter((key) => !documented.has(key));
    assert.deepEqual(gone, [], 'remove the rules of operations no longer served');
  });

  it('answers 401 without credentials, and with a key that does not exist, on every operation that needs them', async () => {
    for (const operation of operations.filter(({ rule }) => rule !== 'public')) {
      for (const options of [{}, { key: 'agy_nosuchkeyatall000000000000000000000' }]) {
        const res = await send(operation, options);
        assert.equal(res.status, 401, `${operation.method} ${operation.path}: ${res.text}`);
      }
    }
  });

  it("answers another user 404 (403 for a name) on every operation about the owner's things", async () => {
    // Bob's own agent, so that Bob is a full user with things of his own.
    await newRegisteredAgent(hostOf(t), bobKey);
    const owned = operations.filter(
      ({ rule }) => rule.startsWith('owner') || rule === 'name-owner',
    );
    for (const operation of owned) {
      const res = await send(operation, { key: bobKey });
      const expected = operation.rule === 'name-owner' ? 403 : 404;
      assert.equal(res.status, expected, `${operation.method} ${operation.path}: ${res.text}`);
      assert.ok(!res.text.includes('alice-only-path'), res.text);
    }
    // Nothing of Alice's changed: the calls above did not reach her things.
    const listing = await call(t.url, 'GET', `/v2/agents/${alice.agent.address}`, {
      key: t.userKey,
    });
    assert.equal(listing.status, 200, listing.text);
    assert.notEqual(listing.body.name, 'taken over');
    const hook = await call(t.url, 'GET', `/v2/webhooks/${alice.webhookId}`, { key: t.userKey });
    assert.equal(hook.status, 200, hook.text);
    assert.equal(hook.body.url, `${endpoint.url}/alice-only-path`);
    const asset = await call(t.url, 'GET', `/v1/storage/assets/${alice.assetId}/contents/`, {
      key: t.userKey,
    });
    assert.equal(asset.status, 200, asset.text);
    assert.equal(Buffer.from(asset.body.contents, 'base64').toString(), 'alice-only-path');
    const pending = await call(t.url, 'GET', `/v2/agents/${alice.agent.address}/mailbox`, {
      key: t.userKey,
    });
    assert.deepEqual(
      pending.body.map((message: { uuid: string }) => message.uuid),
      [alice.uuid],
    );
  });

  it("answers the owner 200 on every read of the owner's things (the 404s above are not for all)", async () => {
    const reads = operations.filter(
      ({ rule, method }) => (rule.startsWith('owner') || rule === 'name-owner') && method === 'GET',
    );
    assert.ok(reads.length >= 5);
    for (const operation of reads) {
      const res = await send(operation, { key: t.userKey }, thingsFor(operation));
      assert.equal(res.status, 200, `${operation.method} ${operation.path}: ${res.text}`);
    }
  });

  /** Every operation about an owner's things, but team administration (about the person). */
  const ownersThings = () =>
    operations.filter(
      ({ rule, path }) =>
        (rule.startsWith('owner') || rule === 'name-owner') && !path.startsWith('/v2/teams'),
    );

  it('answers 403 with a detail to x-team from a non-member, or for no such team, on every operation for users', async () => {
    const forUsers = operations.filter(
      ({ rule }) =>
        rule !== 'public' && rule !== 'agent' && rule !== 'agent-token' && rule !== 'peer',
    );
    for (const operation of forUsers) {
      for (const slug of [TEAM, 'no-such-team']) {
        const res = await send(operation, { key: bobKey, headers: { 'x-team': slug } }, team);
        assert.equal(res.status, 403, `${operation.method} ${operation.path}: ${res.text}`);
        assert.match(res.body.detail, /Not a member of a team/);
        assert.ok(!res.text.includes('team-only-path'), res.text);
      }
    }
  });

  it("answers as for another user across a team's boundary, both ways, on every operation about an owner's things", async () => {
    for (const operation of ownersThings()) {
      const expected = operation.rule === 'name-owner' ? 403 : 404;
      const label = `${operation.method} ${operation.path}`;
      // Bob is no member; Carol is, but without x-team she acts for herself (unless the path
      // names the team).
      for (const key of forPathTeam(operation) ? [bobKey] : [bobKey, carolKey]) {
        const res = await send(operation, { key }, team);
        assert.equal(res.status, expected, `${label}: ${res.text}`);
        assert.ok(!res.text.includes('team-only-path'), res.text);
      }
      // Alice acting for the team does not reach what is hers alone (a call for the team that
      // names nothing of hers reaches the team's things, which is right).
      if (forPathTeam(operation) && !operation.path.includes('{address}')) continue;
      const res = await send(operation, { key: t.userKey, headers: asTeam }, alice);
      assert.equal(res.status, expected, `${label} (as the team): ${res.text}`);
      assert.ok(!res.text.includes('alice-only-path'), res.text);
    }
    // Nothing of the team's changed.
    const listing = await call(t.url, 'GET', `/v2/agents/${team.agent.address}`, {
      key: carolKey,
      headers: asTeam,
    });
    assert.equal(listing.status, 200, listing.text);
    assert.notEqual(listing.body.name, 'taken over');
    const hook = await call(t.url, 'GET', `/v2/webhooks/${team.webhookId}`, {
      key: carolKey,
      headers: asTeam,
    });
    assert.equal(hook.status, 200, hook.text);
    const pending = await call(t.url, 'GET', `/v2/agents/${team.agent.address}/mailbox`, {
      key: carolKey,
      headers: asTeam,
    });
    assert.deepEqual(
      pending.body.map((message: { uuid: string }) => message.uuid),
      [team.uuid],
    );
  });

  it("answers every member acting for the team 200 on every read of the team's things", async () => {
    const reads = ownersThings().filter(({ method }) => method === 'GET');
    assert.ok(reads.length >= 5);
    for (const key of [t.userKey, carolKey]) {
      for (const operation of reads) {
        const res = await send(operation, { key, headers: asTeam }, team);
        assert.equal(res.status, 200, `${operation.method} ${operation.path}: ${res.text}`);
      }
    }
  });

  it('refuses the attestation of another agent on operations an agent may call for itself', async () => {
    const stranger = TestIdentity.random();
    const forAgents = operations.filter(({ rule }) => rule.endsWith('-or-agent'));
    assert.ok(forAgents.length >= 5);
    for (const operation of forAgents) {
      const res = await send(operation, { authorization: stranger.authorization(clock.now()) });
      assert.equal(res.status, 403, `${operation.method} ${operation.path}: ${res.text}`);
    }
    const interaction = await call(t.url, 'POST', '/v2/agents/interactions', {
      authorization: stranger.authorization(clock.now()),
      body: { source: alice.agent.address, target: stranger.address, session_id: randomUUID() },
    });
    assert.equal(interaction.status, 403, interaction.text);
    // An agent the owner let reach none of her assets finds none of them.
    for (const operation of operations.filter(({ rule }) => rule === 'owner-or-granted-agent')) {
      const res = await send(operation, { authorization: stranger.authorization(clock.now()) });
      assert.equal(res.status, 404, `${operation.method} ${operation.path}: ${res.text}`);
    }
    // An agent's attestation is no user's key.
    const usersOnly = operations.filter(({ rule }) =>
      ['user', 'owner', 'name-owner'].includes(rule),
    );
    for (const operation of usersOnly) {
      const res = await send(operation, { authorization: alice.agent.authorization(clock.now()) });
      assert.equal(res.status, 401, `${operation.method} ${operation.path}: ${res.text}`);
    }
    // Nor is it a v1 access token, nor the agent owner's key.
    for (const operation of operations.filter(({ rule }) => rule === 'agent-token')) {
      for (const options of [
        { authorization: alice.agent.authorization(clock.now()) },
        { key: t.userKey },
      ]) {
        const res = await send(operation, options);
        assert.equal(res.status, 401, `${operation.method} ${operation.path}: ${res.text}`);
      }
    }
  });

  it("answers 404 to an agent that is not a peer, and 401 to a user's key, on every operation for peers", async () => {
    const forPeers = operations.filter(({ rule }) => rule === 'peer');
    assert.equal(forPeers.length, 2);
    for (const operation of forPeers) {
      const label = `${operation.method} ${operation.path}`;
      for (const agent of [TestIdentity.random(), alice.agent]) {
        const res = await send(operation, { authorization: agent.authorization(clock.now()) });
        assert.equal(res.status, 404, `${label}: ${res.text}`);
        assert.match(res.body.detail, /not a peer of this Agentry/, label);
      }
      const res = await send(operation, { key: t.userKey });
      assert.equal(res.status, 401, `${label}: ${res.text}`);
    }
  });

  it('refuses a v1 access token on every operation but the v1 mailbox', async () => {
    const challenge = await call(t.url, 'POST', '/v1/auth/challenge', {
      body: { address: alice.agent.address },
    });
    const proof = await call(t.url, 'POST', '/v1/auth/prove', {
      body: {
        address: alice.agent.address,
        challenge: challenge.body.challenge,
        challenge_response: alice.agent.signChallenge(challenge.body.challenge),
      },
    });
    assert.equal(proof.status, 200, proof.text);
    const authorization = `token ${proof.body.access_token}`;
    for (const operation of operations.filter(({ rule }) => rule !== 'public')) {
      if (operation.rule === 'agent-token') continue;
      const res = await send(operation, { authorization });
      assert.equal(res.status, 401, `${operation.method} ${operation.path}: ${res.text}`);
    }
  });

  /** A key of Alice's made with a scope. */
  async function scopedKey(scope: { read_only?: boolean; addresses?: string[] }) {
    return (await madeKey(scope)).key;
  }
  /** A key of Alice's made with a scope, with its id. */
  async function madeKey(scope: { read_only?: boolean; addresses?: string[] }) {
    const res = await call(t.url, 'POST', '/v2/api-keys', { key: t.userKey, body: scope });
    assert.equal(res.status, 200, res.text);
    return { key: res.body.key as string, id: res.body.id as string };
  }
  /** Every operation a user's key may call (an agent-only one answers 401 to any key). */
  const forKeys = () =>
    operations.filter(
      ({ rule }) =>
        rule !== 'public' && rule !== 'agent' && rule !== 'agent-token' && rule !== 'peer',
    );

  it('refuses a read-only key every operation but a read, and lets it read', async () => {
    const key = await scopedKey({ read_only: true });
    const writes = forKeys().filter(
      (operation) =>
        operation.method !== 'GET' &&
        operation.method !== 'HEAD' &&
        subjectOf(operation) !== 'each-call',
    );
    assert.ok(writes.length >= 15);
    for (const operation of writes) {
      const res = await send(operation, { key });
      assert.equal(res.status, 403, `${operation.method} ${operation.path}: ${res.text}`);
      assert.match(res.body.detail, /read-only/);
    }
    // Every read passes (some then want a query these calls do not give: 422; the MCP
    // endpoint's GET opens no stream for anyone: 405).
    for (const operation of forKeys().filter(({ method }) => method === 'GET')) {
      const res = await send(operation, { key }, thingsFor(operation));
      assert.ok(
        [200, 422].includes(res.status) || (operation.path === '/mcp' && res.status === 405),
        `${operation.method} ${operation.path}: ${res.text}`,
      );
    }
    // Its owner's things are as they were.
    const listing = await call(t.url, 'GET', `/v2/agents/${alice.agent.address}`, { key });
    assert.notEqual(listing.body.name, 'taken over');
  });

  it('has a subject for every operation a key may call, and none for an operation gone', () => {
    const forKeyHolders = operations.filter(
      ({ rule }) => rule !== 'agent' && rule !== 'agent-token' && rule !== 'peer',
    );
    const unlisted = forKeyHolders
      .map(({ method, path }) => `${method} ${path}`)
      .filter((key) => SUBJECTS[key] === undefined);
    assert.deepEqual(unlisted, [], 'add each new operation to SUBJECTS');
    const documented = new Set(forKeyHolders.map(({ method, path }) => `${method} ${path}`));
    assert.deepEqual(
      Object.keys(SUBJECTS).filter((key) => !documented.has(key)),
      [],
      'remove the subjects of operations no longer served',
    );
  });

  it('is what docs/keys.md says, operation by operation', () => {
    const docs = readFileSync(new URL('../../docs/keys.md', import.meta.url), 'utf8');
    const rows = new Map<string, [string, string]>();
    for (const match of docs.matchAll(
      /^\| `([A-Z]+ [^`]+)`\s*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|$/gm,
    )) {
      rows.set(match[1]!, [match[2]!, match[3]!]);
    }
    const limited: Record<Subject, string> = {
      path: 'if its path names one of them',
      body: 'if its body’s `address` is one of them',
      none: 'refused',
      'narrower-key': 'for a key limited to some of them',
      anyone: 'as anyone',
      'each-call': 'per tool (docs/mcp.md)',
    };
    // The calls an A2A endpoint carries are its methods.
    const perCall = (path: string) =>
      path.startsWith('/a2a/') ? 'per method (docs/a2a.md)' : 'per tool (docs/mcp.md)';
    for (const { method, path, rule } of operations) {
      const key = `${method} ${path}`;
      const row = rows.get(key);
      assert.ok(row, `docs/keys.md has a row for ${key}`);
      if (rule === 'agent' || rule === 'agent-token' || rule === 'peer') continue;
      const subject = SUBJECTS[key]!;
      const readOnly =
        subject === 'anyone'
          ? 'as anyone'
          : subject === 'each-call'
            ? perCall(path)
            : method === 'GET' || method === 'HEAD'
              ? 'yes'
              : 'refused';
      const scoped = subject === 'each-call' ? perCall(path) : limited[subject];
      assert.deepEqual(row, [readOnly, scoped], key);
    }
    assert.equal(rows.size, operations.length, 'no row for an operation gone');
  });

  const subjectOf = (operation: Operation): Subject =>
    SUBJECTS[`${operation.method} ${operation.path}`]!;
  /** The operations a key limited to agents is held to (those answering anyone aside). */
  const scopedOperations = () =>
    operations.filter(
      (operation) =>
        operation.rule !== 'agent' &&
        operation.rule !== 'agent-token' &&
        operation.rule !== 'peer' &&
        subjectOf(operation) !== 'anyone' &&
        subjectOf(operation) !== 'each-call',
    );
  /** The operation's body with `address` added, as a key limited to `address` might try. */
  const withAddress = (operation: Operation, address: string): unknown => {
    const body = bodyOf(operation);
    return body !== null && typeof body === 'object' && !Array.isArray(body)
      ? { ...body, address }
      : body;
  };

  it('refuses a key limited to another agent every operation not about that agent, with or without a body naming it', async () => {
    const other = TestIdentity.random();
    const key = await scopedKey({ addresses: [other.address] });
    const keysBefore = await call(t.url, 'GET', '/v2/api-keys', { key: t.userKey });
    for (const operation of scopedOperations()) {
      const label = `${operation.method} ${operation.path}`;
      const res = await send(operation, { key });
      assert.equal(res.status, 403, `${label}: ${res.text}`);
      assert.match(res.body.detail, /limited to (one agent|agents)/, label);
      // The body names the key's own agent: still not what the call is about.
      if (operation.method === 'GET' || operation.method === 'HEAD') continue;
      if (subjectOf(operation) === 'body') continue;
      const escalated = await send(operation, { key, body: withAddress(operation, other.address) });
      assert.equal(escalated.status, 403, `${label} with a body address: ${escalated.text}`);
    }
    // No key was made by any of it.
    const keysAfter = await call(t.url, 'GET', '/v2/api-keys', { key: t.userKey });
    assert.deepEqual(keysAfter.body, keysBefore.body, 'no key made or revoked');
  });

  it('lets a key limited to an agent call every operation about it', async () => {
    const mine = await scopedKey({
      addresses: [alice.agent.address, alice.hosted, alice.external],
    });
    const about = scopedOperations().filter((operation) =>
      ['path', 'body'].includes(subjectOf(operation)),
    );
    assert.ok(about.length >= 40);
    for (const operation of about) {
      // Reads only: the writes about Alice's agent would change what the other tests read.
      if (operation.method !== 'GET') continue;
      // The team's agents are not among the key's.
      const res = await send(operation, { key: mine }, thingsFor(operation));
      const expected = forPathTeam(operation) ? 403 : 200;
      assert.equal(res.status, expected, `${operation.method} ${operation.path}: ${res.text}`);
    }
    // A write about it passes the scope (and meets the service's own rules).
    const renamed = await call(t.url, 'PUT', `/v2/agents/${alice.agent.address}`, {
      key: mine,
      body: { address: alice.agent.address.toUpperCase(), redirect_url: alice.redirectUrl },
    });
    assert.equal(renamed.status, 200, renamed.text);
    // It makes keys limited to some of its agents, and no broader one.
    const narrower = await call(t.url, 'POST', '/v2/api-keys', {
      key: mine,
      body: { addresses: [alice.hosted] },
    });
    assert.equal(narrower.status, 200, narrower.text);
    assert.deepEqual(narrower.body.addresses, [alice.hosted]);
    for (const body of [{}, { addresses: [TestIdentity.random().address] }]) {
      const broader = await call(t.url, 'POST', '/v2/api-keys', { key: mine, body });
      assert.equal(broader.status, 403, broader.text);
    }
  });

  it('answers a scoped key as anyone on every operation that takes no credential', async () => {
    const scoped = [
      await scopedKey({ read_only: true }),
      await scopedKey({ addresses: [TestIdentity.random().address] }),
    ];
    const open = operations.filter(
      (operation) => operation.rule === 'public' && subjectOf(operation) === 'anyone',
    );
    assert.ok(open.length >= 20);
    for (const operation of open) {
      const anonymous = await send(operation, {});
      for (const key of scoped) {
        const res = await send(operation, { key });
        assert.equal(
          res.status,
          anonymous.status,
          `${operation.method} ${operation.path}: ${res.text}`,
        );
      }
    }
  });

  it('refuses a revoked key every operation, and ends the streams it opened with a last event saying why', async () => {
    const { key, id } = await madeKey({});
    const streams = operations.filter(({ path }) => path.endsWith('/stream'));
    assert.equal(streams.length, 3);
    const open = await Promise.all(
      streams.map((operation) => openStream(`${t.url}${pathOf(operation)}`, { key })),
    );
    for (const stream of open) assert.equal(stream.status, 200);
    const revoked = await call(t.url, 'DELETE', `/v2/api-keys/${id}`, { key: t.userKey });
    assert.equal(revoked.status, 200, revoked.text);
    for (const stream of open) {
      // A chat session's stream starts with what was said in it before.
      let last = await stream.next(2000);
      while (['message', 'acknowledgement', 'failure'].includes(last.event ?? '')) {
        last = await stream.next(2000);
      }
      assert.equal(last.event, 'end');
      assert.equal(JSON.parse(last.data).reason, 'key_revoked');
      await stream.ended;
    }
    for (const operation of forKeys()) {
      const res = await send(operation, { key }, thingsFor(operation));
      assert.equal(res.status, 401, `${operation.method} ${operation.path}: ${res.text}`);
    }
  });

  it('holds each MCP tool call to the rules of every credential kind', async () => {
    const readAlice = { address: alice.agent.address };
    /** A tool call's outcome for a key: 'ok', or its tool error's text. */
    const outcome = async (
      client: Awaited<ReturnType<typeof mcpClient>>['client'],
      name: string,
      args: Record<string, unknown>,
    ) => {
      const result = await callTool(client, name, args);
      return result.isError ? textOf(result) : 'ok';
    };
    const connect = (key: string, headers: Record<string, string> = {}) =>
      mcpClient(t.url, key, headers);
    const owner = await connect(t.userKey);
    const bob = await connect(bobKey);
    const acrossTeam = await connect(t.userKey, asTeam);
    const reader = await connect(await scopedKey({ read_only: true }));
    const elsewhere = await connect(
      await scopedKey({ addresses: [TestIdentity.random().address] }),
    );
    const revocable = await madeKey({});
    const revoked = await connect(revocable.key);
    try {
      // The owner reads and writes.
      assert.equal(await outcome(owner.client, 'get_agent_activity', readAlice), 'ok');
      assert.equal(
        await outcome(owner.client, 'stop_hosted_agent', { address: alice.hosted }),
        'ok',
      );
      // Another user, and the owner acting for a team, meet Alice's things as none at all.
      for (const other of [bob, acrossTeam]) {
        assert.match(await outcome(other.client, 'get_agent_activity', readAlice), /not found/i);
        assert.match(
          await outcome(other.client, 'read_hosted_agent_logs', { address: alice.hosted }),
          /not found/i,
        );
        assert.match(
          await outcome(other.client, 'start_hosted_agent', {
            address: alice.hosted,
            wait_seconds: 0,
          }),
          /not found/i,
        );
      }
      // A read-only key reads, and every tool that writes answers a tool error saying why.
      assert.equal(await outcome(reader.client, 'get_agent_activity', readAlice), 'ok');
      const { tools } = await reader.client.listTools();
      const writing = tools.filter((tool) => tool.annotations?.readOnlyHint === false);
      assert.ok(writing.length >= 7);
      for (const tool of writing) {
        const text = await outcome(reader.client, tool.name, {});
        // Arguments are checked first: a call with none is refused for them or for the key.
        assert.match(text, /read-only|Invalid arguments/, tool.name);
      }
      assert.match(
        await outcome(reader.client, 'start_hosted_agent', { address: alice.hosted }),
        /read-only/,
      );
      // A key limited to another agent: no call about Alice's agent, nor about no one agent.
      assert.match(await outcome(elsewhere.client, 'get_agent_activity', readAlice), /limited to/);
      assert.match(await outcome(elsewhere.client, 'search_agents', { query: '' }), /limited to/);
      // A revoked key is refused at the door, session or not.
      await call(t.url, 'DELETE', `/v2/api-keys/${revocable.id}`, { key: t.userKey });
      await assert.rejects(
        callTool(revoked.client, 'search_agents', { query: '' }),
        /API key has been revoked/,
      );
      const refused = await call(t.url, 'POST', '/mcp', { key: revocable.key, body: {} });
      assert.equal(refused.status, 401);
    } finally {
      for (const open of [owner, bob, acrossTeam, reader, elsewhere, revoked]) {
        await open.client.close().catch(() => {});
      }
    }
  });

  it('holds each A2A call to the rules of every credential kind', async () => {
    // A chat agent of Alice's, served over A2A privately: to any user's key.
    const agent = TestIdentity.random();
    await registerAgent(hostOf(t), t.userKey, agent, {
      redirectUrl: alice.redirectUrl,
      listing: { protocols: [CHAT_PROTOCOL_DIGEST] },
    });
    const served = await call(t.url, 'PUT', `/v2/agents/${agent.address}/a2a`, {
      key: t.userKey,
      body: { access: 'private' },
    });
    assert.equal(served.status, 200, served.text);
    const card = (options: CallOptions) =>
      call(t.url, 'GET', `/a2a/${agent.address}/.well-known/agent-card.json`, options);
    const rpc = (options: CallOptions, method: string, params: unknown) =>
      call(t.url, 'POST', `/a2a/${agent.address}`, {
        ...options,
        body: { jsonrpc: '2.0', id: 1, method, params },
      });
    // Answered at once, with the task submitted: the agent is not waited for.
    const send = (options: CallOptions) =>
      rpc(options, 'SendMessage', {
        message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }] },
        configuration: { returnImmediately: true },
      });
    const getTask = (options: CallOptions, id: string) => rpc(options, 'GetTask', { id });
    const outcome = async (options: CallOptions) => {
      const [read, sent] = await Promise.all([card(options), send(options)]);
      return `card ${read.status}, send ${sent.status}${sent.body?.error ? ` ${sent.body.error.code}` : ''}`;
    };
    const owner = await send({ key: t.userKey });
    assert.equal(owner.status, 200, owner.text);
    const taskId = owner.body.result.task.id as string;
    assert.equal((await getTask({ key: t.userKey }, taskId)).body.result?.id, taskId);

    assert.equal(await outcome({ key: t.userKey }), 'card 200, send 200');
    // Any user's key may call a private agent, from their own chat identity: another caller's
    // task is not theirs.
    for (const other of [{ key: bobKey }, { key: carolKey }, { key: t.userKey, headers: asTeam }]) {
      assert.equal(await outcome(other), 'card 200, send 200', JSON.stringify(other.headers));
      assert.equal((await getTask(other, taskId)).body.error?.code, -32001);
    }
    assert.equal(await outcome({}), 'card 401, send 401');
    const reader = await scopedKey({ read_only: true });
    assert.equal(await outcome({ key: reader }), 'card 200, send 403');
    assert.equal((await getTask({ key: reader }, taskId)).body.result?.id, taskId);
    const elsewhere = await scopedKey({ addresses: [TestIdentity.random().address] });
    assert.equal(await outcome({ key: elsewhere }), 'card 403, send 403');
    // A key limited to the agent reads its card; a call speaks for a person: refused.
    const limited = await scopedKey({ addresses: [agent.address] });
    assert.equal(await outcome({ key: limited }), 'card 200, send 403');
    const revocable = await madeKey({});
    assert.equal(await outcome({ key: revocable.key }), 'card 200, send 200');
    await call(t.url, 'DELETE', `/v2/api-keys/${revocable.id}`, { key: t.userKey });
    assert.equal(await outcome({ key: revocable.key }), 'card 401, send 401');
    // Only the owner changes the setting.
    for (const other of [{ key: bobKey }, { key: t.userKey, headers: asTeam }]) {
      const refused = await call(t.url, 'PUT', `/v2/agents/${agent.address}/a2a`, {
        ...other,
        body: { access: 'public' },
      });
      assert.equal(refused.status, 404, refused.text);
    }
  });

  it('opens no console session with a scoped key', async () => {
    for (const scope of [{ read_only: true }, { addresses: [alice.agent.address] }]) {
      const res = await call(t.url, 'POST', '/v2/session', {
        body: { api_key: await scopedKey(scope) },
        headers: { 'x-agentry-csrf': '1' },
      });
      assert.equal(res.status, 403, res.text);
      assert.match(res.body.detail, /scoped API key/);
    }
  });

  it('never answers an anonymous caller with a value only the owner may see', async () => {
    const ownerOnly = [
      alice.redirectUrl,
      new URL(alice.redirectUrl).host,
      'alice-only-path',
      alice.keyId,
      alice.uuid,
      t.userKey,
      'team-only-path',
      team.keyId,
      team.uuid,
    ];
    for (const operation of operations) {
      const res = await send(operation, {});
      for (const value of ownerOnly) {
        assert.ok(
          !res.text.includes(value),
          `${operation.method} ${operation.path} answered ${value}: ${res.text}`,
        );
      }
    }
  });

  it("refuses a removed member's team key every operation, and ends what it opened", async () => {
    // Carol makes a key for the team, acting for it, and follows the team's agents with it.
    const made = await call(t.url, 'POST', '/v2/api-keys', {
      key: carolKey,
      headers: asTeam,
      body: { label: 'carol for the team' },
    });
    assert.equal(made.status, 200, made.text);
    const teamKey = made.body.key as string;
    assert.equal(
      (await call(t.url, 'GET', `/v2/webhooks/${team.webhookId}`, { key: teamKey })).status,
      200,
    );
    const stream = await openStream(`${t.url}/v2/activity/stream`, { key: teamKey });
    const asMember = await openStream(`${t.url}/v2/agents/${team.agent.address}/activity/stream`, {
      key: carolKey,
      headers: asTeam,
    });
    assert.equal(stream.status, 200);
    assert.equal(asMember.status, 200);
    // An owner's key made for the team by the operator is no member's: it stays.
    const removed = await call(t.url, 'DELETE', `/v2/teams/${TEAM}/members/carol`, {
      key: t.userKey,
    });
    assert.equal(removed.status, 200, removed.text);
    try {
      for (const open of [stream, asMember]) {
        const last = await open.next(2000);
        assert.equal(last.event, 'end');
        assert.equal(JSON.parse(last.data).reason, 'member_removed');
        await open.ended;
      }
      for (const operation of forKeys()) {
        const res = await send(operation, { key: teamKey }, team);
        assert.equal(res.status, 401, `${operation.method} ${operation.path}: ${res.text}`);
        assert.ok(!res.text.includes('team-only-path'), res.text);
      }
    } finally {
      const back = await call(t.url, 'POST', `/v2/teams/${TEAM}/members`, {
        key: t.userKey,
        body: { user: 'carol' },
      });
      assert.equal(back.status, 201, back.text);
    }
    // Back in the team, a key made before is still over: it belonged to the membership.
    const again = await call(t.url, 'GET', `/v2/webhooks/${team.webhookId}`, { key: teamKey });
    assert.equal(again.status, 401, again.text);
  });
});

describeOnEachDialect('an agent that changes owner', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  let endpoint: Awaited<ReturnType<typeof startEndpoint>>;
  let bobKey: string;

  before(async () => {
    endpoint = await startEndpoint();
    t = await startTestServer({ dialect, clock, config: { allowPrivateTargets: true } });
    bobKey = await t.addUser('bob');
  });
  after(async () => {
    await t.close();
    await endpoint.close();
  });

  const aliceKey = () => t.userKey;

  function envelopeFrom(sender: TestIdentity, target: string): EnvelopeFields {
    return sender.signEnvelope(
      makeEnvelope({
        sender: sender.address,
        target,
        payloadJson: '{"text":"hello"}',
        nonce: Math.floor(Math.random() * 1e9),
      }),
    );
  }
  const hex = (envelope: EnvelopeFields): string =>
    Buffer.from(envelopeDigest(envelope)).toString('hex');

  async function trace(
    address: string,
    key: string,
    path = '',
  ): Promise<{ status: number; rows: DeliveryEventView[] }> {
    const res = await call(t.url, 'GET', `/v2/agents/${address}/deliveries${path}`, { key });
    return { status: res.status, rows: res.status === 200 ? res.body : [] };
  }

  /** Alice's agent X with a full history: a message received, polled, deleted; a refusal; a forward. */
  async function historyUnderAlice(x: TestIdentity, from: TestIdentity) {
    const delivered = envelopeFrom(from, x.address);
    assert.equal(
      (await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: delivered })).status,
      200,
    );
    const uuid = messageUuid(delivered);
    const agentAuth = { authorization: x.authorization(clock.now()) };
    assert.equal(
      (await call(t.url, 'GET', `/v2/agents/${x.address}/mailbox`, agentAuth)).status,
      200,
    );
    assert.equal(
      (await call(t.url, 'DELETE', `/v2/agents/${x.address}/mailbox/${uuid}`, agentAuth)).status,
      200,
    );
    // Signed by another key than the sender's: refused, and recorded for X's owner.
    const forged = {
      ...envelopeFrom(from, x.address),
      signature: envelopeFrom(TestIdentity.random(), x.address).signature,
    };
    assert.notEqual(
      (await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: forged })).status,
      200,
    );
    const forwarded = envelopeFrom(from, x.address);
    assert.equal(
      (await call(t.url, 'POST', '/v2/agents/proxy/submit', { body: forwarded })).status,
      200,
    );
    const rows = (await trace(x.address, aliceKey())).rows;
    assert.deepEqual([...new Set(rows.map((row) => row.event))].sort(), [
      'deleted',
      'forwarded',
      'polled',
      'refused',
      'stored',
      'submitted',
    ]);
    return { delivered, uuid, forwarded };
  }

  it('carries no history to the new owner, and none of the new owner back to the old one', async () => {
    const x = TestIdentity.random();
    const from = TestIdentity.random();
    await registerAgent(hostOf(t), aliceKey(), x, { redirectUrl: `${endpoint.url}/alice` });
    // Alice also owns the sender, so she sees the digest look-up from both ends.
    await registerAgent(hostOf(t), aliceKey(), from);
    const { delivered, uuid } = await historyUnderAlice(x, from);
    // X reports an error while Alice owns it.
    const reported = await call(t.url, 'POST', '/v1/events', {
      authorization: x.authorization(clock.now()),
      body: {
        events: [
          {
            id: randomUUID(),
            category: 'user',
            kind: 'error',
            timestamp: new Date(clock.now()).toISOString(),
            message: "alice's secret failure",
          },
        ],
      },
    });
    assert.equal(reported.status, 200, reported.text);

    assert.equal(
      (await call(t.url, 'DELETE', `/v2/agents/${x.address}`, { key: aliceKey() })).status,
      200,
    );
    clock.advance(1000);
    await registerAgent(hostOf(t), bobKey, x, { redirectUrl: `${endpoint.url}/bob` });

    // Bob, the new owner: an empty trace, no message of Alice's, no digest of hers.
    const bobs = await trace(x.address, bobKey);
    assert.equal(bobs.status, 200);
    assert.deepEqual(bobs.rows, []);
    assert.equal((await trace(x.address, bobKey, `/${uuid}`)).status, 404);
    const byDigest = await call(
      t.url,
      'GET',
      `/v2/deliveries?digest=${hex(delivered)}&target=${x.address}`,
      { key: bobKey },
    );
    assert.equal(byDigest.status, 404, byDigest.text);
    // Alice no longer owns X: 404, as for any agent not hers.
    assert.equal((await trace(x.address, aliceKey())).status, 404);
    // Nor does X's timeline carry anything of Alice's time: Bob's registration alone.
    const timeline = await call(t.url, 'GET', `/v2/agents/${x.address}/activity`, { key: bobKey });
    assert.equal(timeline.status, 200, timeline.text);
    assert.deepEqual(
      timeline.body.entries.map((entry: { kind: string }) => entry.kind),
      ['agent.registered'],
    );
    assert.ok(!timeline.text.includes('secret failure'));
    const status = await call(t.url, 'GET', `/v2/agents/${x.address}`, { key: bobKey });
    assert.deepEqual(status.body.status, {
      status: 'offline',
      last_seen: null,
      reason: 'never seen',
    });
    assert.equal(
      (await call(t.url, 'GET', `/v2/agents/${x.address}/activity`, { key: aliceKey() })).status,
      404,
    );

    // Bob's own history starts, and Alice sees none of it, not even as the sender's owner.
    const fresh = envelopeFrom(from, x.address);
    assert.equal(
      (await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: fresh })).status,
      200,
    );
    assert.deepEqual(
      (await trace(x.address, bobKey)).rows.map((row) => [row.event, row.uuid]),
      [
        ['submitted', messageUuid(fresh)],
        ['stored', messageUuid(fresh)],
      ],
    );
    assert.equal((await trace(x.address, aliceKey())).status, 404);
    // As the owner of the sender, Alice still finds her own message to X by its digest.
    const asSender = await call(
      t.url,
      'GET',
      `/v2/deliveries?digest=${hex(fresh)}&target=${x.address}`,
      { key: aliceKey() },
    );
    assert.equal(asSender.status, 200, asSender.text);
    assert.deepEqual(
      asSender.body.map((row: DeliveryEventView) => row.event),
      ['submitted', 'stored'],
    );
  });

  it('deletes the trace with the agent, so that nothing of it is left to show', async () => {
    const x = TestIdentity.random();
    const from = TestIdentity.random();
    await registerAgent(hostOf(t), aliceKey(), x, { redirectUrl: `${endpoint.url}/alice` });
    await historyUnderAlice(x, from);
    assert.equal(
      (await call(t.url, 'DELETE', `/v2/agents/${x.address}`, { key: aliceKey() })).status,
      200,
    );
    // The operator's view reads every stored row, whoever it belonged to: none are left.
    const stored = await t.server.ctx.services.deliveries.listAsOperator(x.address, {
      limit: 100,
      offset: 0,
    });
    assert.deepEqual(stored, []);
  });

  it("does not show the sender's new owner what the sender's previous owner sent", async () => {
    const sender = TestIdentity.random();
    const target = await newRegisteredAgent(hostOf(t), bobKey);
    await registerAgent(hostOf(t), aliceKey(), sender);
    const sent = envelopeFrom(sender, target.address);
    assert.equal(
      (await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: sent })).status,
      200,
    );
    const lookUp = (key: string) =>
      call(t.url, 'GET', `/v2/deliveries?digest=${hex(sent)}&target=${target.address}`, { key });
    assert.equal((await lookUp(aliceKey())).status, 200);
    // The sender changes hands; Carol, its new owner, owns neither end of Alice's message.
    assert.equal(
      (await call(t.url, 'DELETE', `/v2/agents/${sender.address}`, { key: aliceKey() })).status,
      200,
    );
    clock.advance(1000);
    const carolKey = await t.addUser(`carol-${dialect}`);
    await registerAgent(hostOf(t), carolKey, sender);
    assert.equal((await lookUp(carolKey)).status, 404);
    assert.equal((await lookUp(aliceKey())).status, 404);
    // Bob, who owns the target throughout, still sees it.
    assert.equal((await lookUp(bobKey)).status, 200);
  });

  describe('refusals to anonymous senders', () => {
    it('say why a forward was refused without naming the address behind the URL', async () => {
      const guarded = await startTestServer({ dialect, clock });
      try {
        const agent = await newRegisteredAgent(hostOf(guarded), guarded.userKey, {
          redirectUrl: 'http://10.1.2.3:8001/submit',
          listing: { keep_failed_forwards: false },
        });
        const sender = TestIdentity.random();
        const res = await call(guarded.url, 'POST', '/v2/agents/proxy/submit', {
          body: envelopeFrom(sender, agent.address),
        });
        assert.equal(res.status, 400, res.text);
        assert.match(res.body.detail, /private network address/);
        assert.ok(!res.text.includes('10.1.2.3'), res.text);
        const rows = await call(guarded.url, 'GET', `/v2/agents/${agent.address}/deliveries`, {
          key: guarded.userKey,
        });
        const forwarded = rows.body.find((row: DeliveryEventView) => row.event === 'forwarded');
        assert.match(forwarded.detail, /10\.1\.2\.3/);
      } finally {
        await guarded.close();
      }
    });
  });
});
