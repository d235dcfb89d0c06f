import assert from 'node:assert/strict';
import type { Store } from '../../src/store/index.js';
import { call } from './http.js';
import type { TestServer } from './server.js';
import type { TestIdentity } from './uagent.js';

/** A running service and the store behind it. */
export interface AgentHost {
  url: string;
  store: Store;
}

export function hostOf(t: TestServer): AgentHost {
  return { url: t.url, store: t.server.ctx.store };
}

export interface RegisterOptions {
  /** The URL the proxy forwards to; without it the agent is a mailbox agent only. */
  redirectUrl?: string;
}

/**
 * Proves the identity through the real identity API, then registers the agent with a
 * mailbox. The registry API is not part of this code base yet, so the listing is written
 * through the store here; this is the one place that changes when it arrives.
 */
export async function registerAgent(
  host: AgentHost,
  ownerKey: string,
  identity: TestIdentity,
  options: RegisterOptions = {},
): Promise<void> {
  const issued = await call(host.url, 'GET', `/v2/identity/${identity.address}/challenge`, {
    key: ownerKey,
  });
  assert.equal(issued.status, 200, issued.text);
  const challenge = issued.body.challenge as string;
  const proof = await call(host.url, 'POST', '/v2/identity', {
    key: ownerKey,
    body: {
      address: identity.address,
      challenge,
      challenge_response: identity.signChallenge(challenge),
    },
  });
  assert.equal(proof.status, 200, proof.text);

  const owner = await host.store.repos.identities.find(identity.address);
  assert.ok(owner, 'a proven identity has an owner');
  const now = Date.now();
  // The agents table has no repository here yet: written directly until the registry API exists.
  await host.store.db
    .insertInto('agents')
    .values({
      address: identity.address,
      user_id: owner.user_id,
      name: `agent ${identity.address.slice(-8)}`,
      handle: null,
      redirect_url: options.redirectUrl ?? null,
      agent_type: 'uagent',
      profile: '{}',
      endpoints: '[]',
      protocols: '[]',
      metadata: null,
      registered_at: now,
      updated_at: now,
    })
    .execute();
  await host.store.repos.mailboxes.create({
    address: identity.address,
    user_id: owner.user_id,
    created_at: now,
  });
}
