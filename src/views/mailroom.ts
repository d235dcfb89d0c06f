import type { StoredAgent } from '../store/repositories/agents.js';
import type { PendingMessage } from '../store/repositories/mailbox.js';
import type { V1Agent } from '../wire/mailroom.js';
import { storedEnvelopeJson } from './mailbox.js';

/**
 * An agent as the v1 mailroom shows it. Its type follows from its listing (a URL to forward
 * to makes it a proxy agent); transfers are counted per user here, not per agent, so the
 * transfer counters are 0.
 */
export function v1Agent(agent: StoredAgent): V1Agent {
  return {
    address: agent.address,
    name: agent.name,
    pending_messages: agent.mailbox.pending_messages,
    bytes_transferred: 0,
    previous_bytes_transferred: 0,
    readme: agent.profile.readme || null,
    avatar_url: agent.profile.avatar_url || null,
    short_description: agent.profile.description || null,
    agent_type: agent.redirect_url ? 'proxy' : 'mailbox',
  };
}

/**
 * A page of the v1 mailbox as JSON text: the stored envelopes spliced in as the v2 list does,
 * in the page shape of the v1 API. The total is not counted (the client reads `items`).
 */
export function v1MailboxPageJson(messages: PendingMessage[], page: number, size: number): string {
  return `{"items":[${messages.map(storedEnvelopeJson).join(',')}],"total":null,"page":${page},"size":${size},"pages":null}`;
}
