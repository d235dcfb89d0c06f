import { A2A_PROTOCOL_VERSION, type AgentCard, type AgentSkill } from '@a2a-js/sdk';
import { duplicateInterfacesForLegacy } from '@a2a-js/sdk/compat/v0_3';
import type { A2aAccess } from '../../store/repositories/a2a.js';
import { CHAT_PROTOCOL_DIGEST } from '../../wire/chat.js';
import type { SearchAgent } from '../../wire/search.js';

/** The name of the security scheme a card declares: a user API key of this Agentry. */
export const API_KEY_SCHEME = 'agentryApiKey';
/** What an agent takes and gives over A2A: text, carried as chat messages. */
const TEXT_MODES = ['text/plain'];
/** How much of a readme a card's description carries at most. */
const DESCRIPTION_MAX = 500;

/** Where an agent is served over A2A: its JSON-RPC endpoint, and its card beside it. */
export function a2aUrls(publicUrl: string, address: string): { rpc: string; card: string } {
  const rpc = `${publicUrl}/a2a/${address}`;
  return { rpc, card: `${rpc}/.well-known/agent-card.json` };
}

/**
 * The A2A agent card of an agent served over A2A (docs/a2a.md, "Cards"), from its public
 * listing: name and description; a skill for the chat protocol (what A2A calls are carried as,
 * described by the readme) and one for each other protocol it speaks; the JSON-RPC interface
 * at Agentry, at A2A 1.0 and at 0.3; a user API key as the Bearer token, required when the
 * owner serves it privately and accepted when publicly.
 */
export function agentCard(
  listing: SearchAgent,
  access: A2aAccess,
  publicUrl: string,
  agentryVersion: string,
): AgentCard {
  const { rpc } = a2aUrls(publicUrl, listing.address);
  const description = describe(listing);
  const chat: AgentSkill = {
    id: 'chat',
    name: 'Chat',
    description: `${description} Speak to it in text: each message is carried to the agent as a chat protocol message (AgentChatProtocol 0.3.0), and its reply comes back as the answer.`,
    tags: ['chat', 'uagents'],
    examples: [],
    inputModes: TEXT_MODES,
    outputModes: TEXT_MODES,
    securityRequirements: [],
  };
  const others = listing.protocols
    .filter((protocol) => protocol.digest !== CHAT_PROTOCOL_DIGEST)
    .map((protocol): AgentSkill => ({
      id: protocol.digest,
      name: `${protocol.name} ${protocol.version}`,
      description: `Speaks the uAgents protocol ${protocol.name} ${protocol.version} (${protocol.digest}) with uAgents agents; over A2A it is reached in chat.`,
      tags: ['uagents-protocol', protocol.name],
      examples: [],
      inputModes: TEXT_MODES,
      outputModes: TEXT_MODES,
      securityRequirements: [],
    }));
  return {
    name: listing.name || listing.address,
    description,
    supportedInterfaces: duplicateInterfacesForLegacy(
      [{ url: rpc, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: A2A_PROTOCOL_VERSION }],
      ['JSONRPC'],
    ),
    provider: { organization: 'Agentry', url: publicUrl },
    version: agentryVersion,
    documentationUrl: `${publicUrl}/docs`,
    capabilities: {
      streaming: true,
      pushNotifications: false,
      extensions: [],
      extendedAgentCard: false,
    },
    securitySchemes: {
      [API_KEY_SCHEME]: {
        scheme: {
          $case: 'httpAuthSecurityScheme',
          value: {
            scheme: 'bearer',
            bearerFormat: 'Agentry API key',
            description:
              access === 'private'
                ? 'A user API key of this Agentry: the caller speaks to the agent from their own chat identity.'
                : 'Optional: with a user API key of this Agentry the caller speaks from their own chat identity, and without one from the chat identity of the agent’s owner.',
          },
        },
      },
    },
    securityRequirements:
      access === 'private' ? [{ schemes: { [API_KEY_SCHEME]: { list: [] } } }] : [],
    defaultInputModes: TEXT_MODES,
    defaultOutputModes: TEXT_MODES,
    skills: [chat, ...others],
    signatures: [],
    ...(listing.avatar_href !== null && { iconUrl: absolute(listing.avatar_href, publicUrl) }),
  };
}

/** Whether the listing says the agent speaks the chat protocol. */
export function speaksChat(listing: Pick<SearchAgent, 'protocols'>): boolean {
  return listing.protocols.some((protocol) => protocol.digest === CHAT_PROTOCOL_DIGEST);
}

/** The listing's description, else its readme's first paragraph, else what it is. */
function describe(listing: SearchAgent): string {
  const given = listing.description.trim();
  if (given !== '') return given;
  const paragraph = listing.readme
    .split(/\n\s*\n/)
    .map((part) => part.replace(/^#+\s*/gm, '').trim())
    .find((part) => part !== '');
  if (paragraph !== undefined) {
    return paragraph.length > DESCRIPTION_MAX
      ? `${paragraph.slice(0, DESCRIPTION_MAX - 1)}…`
      : paragraph;
  }
  return `A uAgents agent (${listing.address}) on Agentry.`;
}

function absolute(href: string, publicUrl: string): string {
  try {
    return new URL(href, `${publicUrl}/`).toString();
  } catch {
    return href;
  }
}
