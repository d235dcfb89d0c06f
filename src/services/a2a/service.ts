import type { AgentCard } from '@a2a-js/sdk';
import { DefaultExecutionEventBusManager, DefaultRequestHandler } from '@a2a-js/sdk/server';
import type { Principal, UserPrincipal } from '../../auth/principal.js';
import { ConflictError, NotFoundError, UnauthenticatedError } from '../../errors.js';
import type { Clock } from '../../infra/clock.js';
import type { Store } from '../../store/index.js';
import type { A2aAccess } from '../../store/repositories/a2a.js';
import type { SearchAgent } from '../../wire/search.js';
import type { AgentsService } from '../agents.js';
import type { ChatService } from '../chat.js';
import type { SearchService } from '../search.js';
import { a2aUrls, agentCard, speaksChat } from './cards.js';
import { A2aCaller, ANONYMOUS, ChatExecutor } from './executor.js';
import { A2aTaskStore } from './tasks.js';

export interface A2aPolicy {
  publicUrl: string;
  /** Agentry's version, which the cards give as the agents' version. */
  version: string;
  /** How long a call waits for an agent's reply before answering with the task working. */
  replyTimeoutMs: number;
}

/** To whom an agent is served over A2A, and where (docs/a2a.md, "Serving an agent"). */
export interface A2aSetting {
  address: string;
  access: A2aAccess | 'off';
  card_url: string | null;
  url: string | null;
}

/** An agent served over A2A, ready for one call. */
export interface ServedAgent {
  card: AgentCard;
  handler: DefaultRequestHandler;
  caller: A2aCaller;
}

/** How long a process trusts what it read of an agent's card (its listing and setting). */
const CARD_TTL_MS = 2_000;
/** How many agents' cards a process keeps at most. */
const CARDS_KEPT = 1_000;

/**
 * Agents served over A2A (docs/a2a.md): the owner's setting per agent, the cards, and a request
 * handler of the A2A SDK for each call, over one task store and one set of event buses, whose
 * executor carries A2A messages to the agent as chat messages.
 */
export class A2aService {
  readonly executor: ChatExecutor;
  private readonly tasks: A2aTaskStore;
  /** The event buses of the tasks running in this process (cancel and resubscribe find them). */
  private readonly buses = new DefaultExecutionEventBusManager();
  /** Cards read lately, by address. */
  private readonly cards = new Map<
    string,
    { at: number; access: A2aAccess; owner: string; card: AgentCard }
  >();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    chat: ChatService,
    private readonly search: SearchService,
    private readonly agents: AgentsService,
    private readonly policy: A2aPolicy,
  ) {
    this.executor = new ChatExecutor(store, chat, clock, { replyTimeoutMs: policy.replyTimeoutMs });
    this.tasks = new A2aTaskStore(store, this.executor);
  }

  /** Stops the waits of this process's calls (the server is closing). */
  close(): Promise<void> {
    return this.executor.close();
  }

  // ---- The owner's setting ------------------------------------------------------------------

  async setting(principal: UserPrincipal, address: string): Promise<A2aSetting> {
    await this.agents.get(principal.userId, address);
    return this.settingOf(address, (await this.store.repos.a2a.access(address)) ?? 'off');
  }

  /**
   * Serves the caller's agent over A2A (`private`: to callers with an API key; `public`: to
   * anyone), or stops (`off`). Only an agent listed here that speaks the chat protocol can be
   * served: A2A messages are carried to it as chat messages.
   */
  async setAccess(
    principal: UserPrincipal,
    address: string,
    access: A2aAccess | 'off',
  ): Promise<A2aSetting> {
    await this.agents.get(principal.userId, address);
    if (access !== 'off') {
      const listing = await this.search.searchAgent(address).catch((err: unknown) => {
        if (err instanceof NotFoundError) return undefined;
        throw err;
      });
      if (!listing || !speaksChat(listing)) {
        throw new ConflictError(
          `Agent ${address} does not speak the chat protocol (AgentChatProtocol 0.3.0) in its listing: A2A messages are carried to an agent as chat messages, so only a chat agent can be served over A2A`,
        );
      }
    }
    await this.store.repos.a2a.setAccess(address, access, this.clock.now());
    this.cards.delete(address);
    return this.settingOf(address, access);
  }

  // ---- Serving -----------------------------------------------------------------------------

  /**
   * The agent as `principal` may call it over A2A: its card, a request handler, and who calls.
   * 404 when its owner does not serve it (or it stopped speaking the chat protocol); 401 for a
   * caller without a key when it is served privately.
   */
  async serve(address: string, principal: Principal): Promise<ServedAgent> {
    const served = await this.cardOf(address);
    if (principal.kind !== 'user' && served.access === 'private') {
      throw new UnauthenticatedError(
        `Agent ${address} is served over A2A to callers with an API key of this Agentry: send "Authorization: Bearer <api key>"`,
      );
    }
    const caller =
      principal.kind === 'user'
        ? new A2aCaller(principal, principal.userId)
        : // Without a key, a public agent is spoken to from its owner's chat identity.
          new A2aCaller({ kind: 'user', userId: served.owner, keyId: '' }, ANONYMOUS);
    const handler = new DefaultRequestHandler(served.card, this.tasks, this.executor, this.buses);
    return { card: served.card, handler, caller };
  }

  /** The agents served to anyone, by address, a page at a time after `after`, with their cards. */
  async publicCards(
    after: string,
    limit: number,
  ): Promise<{ address: string; card_url: string; card: AgentCard }[]> {
    const rows = await this.store.repos.a2a.listPublic(after, limit);
    const found = await Promise.all(
      rows.map(async ({ address }) => {
        try {
          const { card } = await this.cardOf(address);
          return { address, card_url: a2aUrls(this.policy.publicUrl, address).card, card };
        } catch (err) {
          // Served, but no longer listed or no longer a chat agent: not in the index.
          if (err instanceof NotFoundError) return undefined;
          throw err;
        }
      }),
    );
    return found.filter((entry) => entry !== undefined);
  }

  private async cardOf(
    address: string,
  ): Promise<{ access: A2aAccess; owner: string; card: AgentCard }> {
    const now = this.clock.now();
    const known = this.cards.get(address);
    if (known && now - known.at < CARD_TTL_MS) return known;
    const [access, agent] = await Promise.all([
      this.store.repos.a2a.access(address),
      this.store.repos.agents.find(address),
    ]);
    const notServed = new NotFoundError(`Agent ${address} is not served over A2A here`);
    if (access === undefined || !agent) throw notServed;
    let listing: SearchAgent;
    try {
      listing = await this.search.searchAgent(address);
    } catch (err) {
      if (err instanceof NotFoundError) throw notServed;
      throw err;
    }
    if (!speaksChat(listing)) {
      throw new NotFoundError(
        `Agent ${address} is not served over A2A here: it no longer speaks the chat protocol`,
      );
    }
    const entry = {
      at: now,
      access,
      owner: agent.user_id,
      card: agentCard(listing, access, this.policy.publicUrl, this.policy.version),
    };
    this.cards.delete(address);
    this.cards.set(address, entry);
    if (this.cards.size > CARDS_KEPT) this.cards.delete(this.cards.keys().next().value!);
    return entry;
  }

  private settingOf(address: string, access: A2aAccess | 'off'): A2aSetting {
    const urls = a2aUrls(this.policy.publicUrl, address);
    return {
      address,
      access,
      card_url: access === 'off' ? null : urls.card,
      url: access === 'off' ? null : urls.rpc,
    };
  }
}
