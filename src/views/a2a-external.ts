import { AgentCard } from '@a2a-js/sdk';
import type { A2aRemoteAgentRow } from '../store/repositories/a2a.js';
import type { ExternalAgent } from '../wire/a2a-external.js';
import { isoTimestamp } from '../wire/common.js';

/** An external A2A agent as its owner sees it: the card as last read, and where it is called. */
export function externalAgentView(row: A2aRemoteAgentRow): ExternalAgent {
  const card = AgentCard.fromJSON(JSON.parse(row.card));
  return {
    address: row.address,
    name: card.name,
    description: card.description,
    card_url: row.card_url,
    rpc_url: row.rpc_url,
    protocol_version: row.protocol_version === '0.3' ? '0.3' : '1.0',
    skills: (card.skills ?? []).map((skill) => ({
      id: skill.id,
      name: skill.name,
      description: skill.description,
      tags: skill.tags ?? [],
      examples: skill.examples ?? [],
    })),
    card_read_at: isoTimestamp(Number(row.card_read_at)),
    created_at: isoTimestamp(Number(row.created_at)),
  };
}
