import assert from 'node:assert/strict';
import type { UsageReport } from '../../src/wire/usage.js';
import { call } from './http.js';
import type { TestServer } from './server.js';
import { TestIdentity } from './uagent.js';

/** A running service (a test server, or the benchmark's child process). */
export interface AgentHost {
  url: string;
}

export function hostOf(t: TestServer): AgentHost {
  return { url: t.url };
}

export interface RegisterOptions {
  /** The URL the proxy forwards to; without it the agent is a mailbox agent only. */
  redirectUrl?: string;
  /** Fields of the `RegistrationRequest` to send besides address, url and agent_type. */
  listing?: Record<string, unknown>;
  /** Headers sent with each call, such as `x-team` to register for a team. */
  headers?: Record<string, string>;
}

/** A new agent with a random key, registered by `ownerKey` as {@link registerAgent} does. */
export async function newRegisteredAgent(
  host: AgentHost,
  ownerKey: string,
  options: RegisterOptions = {},
): Promise<TestIdentity> {
  const agent = TestIdentity.random();
  await registerAgent(host, ownerKey, agent, options);
  return agent;
}

/** Proves control of an agent's key for `ownerKey`'s user: challenge, then signed proof. */
export async function proveIdentity(
  host: AgentHost,
  ownerKey: string,
  identity: TestIdentity,
  headers?: Record<string, string>,
): Promise<void> {
  const issued = await call(host.url, 'GET', `/v2/identity/${identity.address}/challenge`, {
    key: ownerKey,
    headers,
  });
  assert.equal(issued.status, 200, issued.text);
  const challenge = issued.body.challenge as string;
  const proof = await call(host.url, 'POST', '/v2/identity', {
    key: ownerKey,
    headers,
    body: {
      address: identity.address,
      challenge,
      challenge_response: identity.signChallenge(challenge),
    },
  });
  assert.equal(proof.status, 200, proof.text);
}

/**
 * Registers an agent as the uAgents client does on connect: challenge, proof, then
 * `POST /v2/agents` (which also creates its mailbox).
 */
export async function registerAgent(
  host: AgentHost,
  ownerKey: string,
  identity: TestIdentity,
  options: RegisterOptions = {},
): Promise<void> {
  const { headers } = options;
  await proveIdentity(host, ownerKey, identity, headers);
  const registered = await call(host.url, 'POST', '/v2/agents', {
    key: ownerKey,
    headers,
    body: {
      address: identity.address,
      name: `agent ${identity.address.slice(-8)}`,
      url: options.redirectUrl ?? null,
      agent_type: 'uagent',
      ...options.listing,
    },
  });
  assert.equal(registered.status, 200, registered.text);
}

/** The caller's usage report this month (`GET /v2/agents/usage/current`), read as `key`. */
export async function currentUsage(url: string, key: string): Promise<UsageReport> {
  const res = await call<UsageReport>(url, 'GET', '/v2/agents/usage/current', { key });
  assert.equal(res.status, 200, res.text);
  return res.body;
}
