import { AgentCard, type AgentInterface, type AgentSkill } from '@a2a-js/sdk';
import { DefaultAgentCardResolver } from '@a2a-js/sdk/client';
import { isLegacyAgentCard } from '@a2a-js/sdk/compat/v0_3/client';
import { interceptors, request, type Dispatcher } from 'undici';
import { RequestValidationError } from '../../errors.js';
import { judgeTarget, PrivateTargetError } from '../../infra/outbound.js';

/** The A2A versions Agentry calls an external agent with, the newer preferred. */
export type A2aVersion = '1.0' | '0.3';

/** An external agent's card as read, checked and normalised to the A2A 1.0 shape. */
export interface ReadCard {
  card: AgentCard;
  /** The card as kept (JSON, A2A 1.0 shape). */
  json: string;
  /** The JSON-RPC interface Agentry calls. */
  rpcUrl: string;
  protocolVersion: A2aVersion;
}

export interface CardReaderPolicy {
  /** Whether cards and agents on private networks may be reached (the operator's setting). */
  allowPrivateTargets: boolean;
  /** How long reading a card may take. */
  timeoutMs: number;
}

/** Redirects a card URL may take (to https, to its new home), each checked by the guard. */
const CARD_MAX_REDIRECTS = 3;
/** The most a card may weigh: a card describes an agent, it does not carry its data. */
const CARD_MAX_BYTES = 256 * 1024;
const PRIVATE_TARGET_HINT =
  'the operator may allow local networks with AGENTRY_ALLOW_PRIVATE_TARGETS=true (or --allow-private-targets)';

/** A 422 about the card URL the caller gave, in one sentence. */
function refused(message: string): RequestValidationError {
  return RequestValidationError.single(['body', 'card_url'], message);
}

function notACard(why: string): RequestValidationError {
  return refused(`Not an A2A agent card: ${why}`);
}

/**
 * Reads external A2A agents' cards (docs/a2a.md, "Inward") through the outbound guard
 * that protects the proxy and webhooks: a card URL is anyone's choice, so it may not reach this
 * machine or its networks unless the operator allows it, and neither may the interface it names.
 * The SDK's resolver normalises A2A 0.3 and 1.0 cards to one shape.
 */
export class CardReader {
  private readonly resolver = new DefaultAgentCardResolver({ legacyCompat: { enabled: true } });
  private readonly dispatcher: Dispatcher;

  constructor(
    /** The outbound guard: every connection, redirects' too, is checked where it is made. */
    guarded: Dispatcher,
    private readonly policy: CardReaderPolicy,
  ) {
    this.dispatcher = guarded.compose(
      interceptors.redirect({ maxRedirections: CARD_MAX_REDIRECTS }),
    );
  }

  /** The card at `url`, checked; a 422 saying what is wrong with it otherwise. */
  async read(url: string): Promise<ReadCard> {
    const raw = await this.fetchJson(url);
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
      throw notACard('the answer is not a JSON object');
    }
    let card: AgentCard;
    try {
      const normalised = this.resolver.normalizeAgentCard(raw);
      // A 0.3 card comes back translated; a 1.0 card as sent, its defaults filled here.
      card = isLegacyAgentCard(raw) ? normalised : AgentCard.fromJSON(normalised);
    } catch (err) {
      throw notACard(err instanceof Error ? err.message : String(err));
    }
    if (typeof card.name !== 'string' || card.name.trim() === '') {
      throw notACard('it has no name');
    }
    const chosen = pickInterface(card.supportedInterfaces ?? []);
    if (!chosen) {
      throw notACard(
        'it names no JSON-RPC interface at an http(s) URL speaking A2A 1.0 or 0.3, which is how Agentry calls an agent',
      );
    }
    await this.checkTarget(chosen.url, 'The JSON-RPC interface the card names');
    return {
      card,
      json: JSON.stringify(AgentCard.toJSON(card)),
      rpcUrl: chosen.url,
      protocolVersion: chosen.version,
    };
  }

  /**
   * Refuses a URL whose host is on a private network unless the operator allows it (the
   * guard checks again where it connects: this check is for a clear answer at registration).
   */
  private async checkTarget(url: string, what: string): Promise<void> {
    if (this.policy.allowPrivateTargets) return;
    const judged = await judgeTarget(url);
    if (judged === 'unresolved')
      throw refused(`${what} (${url}) names a host that does not resolve`);
    if (judged) {
      throw refused(
        `${what} (${url}) points at a private network address: ${judged.message}; ${PRIVATE_TARGET_HINT}`,
      );
    }
  }

  private async fetchJson(url: string): Promise<unknown> {
    let text: string;
    try {
      const response = await request(url, {
        method: 'GET',
        headers: { accept: 'application/json', 'a2a-version': '1.0' },
        dispatcher: this.dispatcher,
        signal: AbortSignal.timeout(this.policy.timeoutMs),
      });
      if (response.statusCode < 200 || response.statusCode >= 300) {
        await response.body.dump();
        throw refused(
          `The agent card could not be read from ${url}: it answered with status ${response.statusCode}`,
        );
      }
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of response.body) {
        size += (chunk as Buffer).length;
        if (size > CARD_MAX_BYTES) {
          response.body.destroy();
          throw notACard(`the answer is larger than ${CARD_MAX_BYTES / 1024} KiB`);
        }
        chunks.push(chunk as Buffer);
      }
      text = Buffer.concat(chunks).toString('utf8');
    } catch (err) {
      if (err instanceof RequestValidationError) throw err;
      throw refused(`The agent card could not be read from ${url}: it ${unreachable(err)}`);
    }
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw notACard(`the answer from ${url} is not JSON`);
    }
  }
}

/** The JSON-RPC interface Agentry calls: the first at A2A 1.0, else the first at 0.3. */
function pickInterface(
  interfaces: AgentInterface[],
): { url: string; version: A2aVersion } | undefined {
  const usable = interfaces.flatMap((entry) => {
    const version = versionOf(entry.protocolVersion);
    if (entry.protocolBinding?.toUpperCase() !== 'JSONRPC' || version === undefined) return [];
    try {
      const parsed = new URL(entry.url);
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return [];
    } catch {
      return [];
    }
    return [{ url: entry.url, version }];
  });
  return usable.find((entry) => entry.version === '1.0') ?? usable[0];
}

/** A card's protocol version as Agentry speaks it; a 1.0 card may leave it out. */
function versionOf(version: string | undefined): A2aVersion | undefined {
  if (version === undefined || version === '' || /^1(\.|$)/.test(version)) return '1.0';
  if (/^0\.3(\.|$)/.test(version)) return '0.3';
  return undefined;
}

/** Why a request got no answer, as a predicate ("is unreachable (ECONNREFUSED)"). */
export function unreachable(err: unknown): string {
  const causes: unknown[] = [];
  for (let e: unknown = err; e instanceof Error && causes.length < 5; e = e.cause) causes.push(e);
  const refusedTarget = causes.find((e) => e instanceof PrivateTargetError);
  if (refusedTarget instanceof PrivateTargetError) {
    return `points at a private network address (${refusedTarget.message}); ${PRIVATE_TARGET_HINT}`;
  }
  if (causes.some((e) => e instanceof Error && e.name === 'TimeoutError')) {
    return 'did not answer in time';
  }
  const code = causes.map((e) => (e as { code?: unknown }).code).find((c) => typeof c === 'string');
  return `is unreachable${code ? ` (${code})` : ''}`;
}

/** What search and the console show of the agent's skills: one section per skill. */
export function skillsReadme(skills: AgentSkill[]): string {
  return skills
    .map((skill) => {
      const lines = [`## ${skill.name || skill.id}`];
      if (skill.description) lines.push('', skill.description);
      const tags = skill.tags ?? [];
      const examples = skill.examples ?? [];
      if (tags.length > 0) lines.push('', `Tags: ${tags.join(', ')}`);
      if (examples.length > 0) {
        lines.push('', 'Examples:', ...examples.map((example) => `- ${example}`));
      }
      return lines.join('\n');
    })
    .join('\n\n');
}
