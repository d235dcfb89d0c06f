import { randomInt, randomUUID } from 'node:crypto';
import { Value } from '@sinclair/typebox/value';
import type { AgentCard } from '@a2a-js/sdk';
import type { Principal } from '../../auth/principal.js';
import { SigningKey, seal, unseal, type EnvelopeFields } from '../../crypto/index.js';
import {
  BadRequestError,
  ConflictError,
  NotFoundError,
  RequestValidationError,
} from '../../errors.js';
import type { ChangeConsumer, ChangeOf } from '../../infra/change-feed.js';
import type { Clock } from '../../infra/clock.js';
import type { HostingKey } from '../../infra/hosting-key.js';
import { RecentSet } from '../../infra/recent-set.js';
import type { Logger } from '../../logger.js';
import type { Store } from '../../store/index.js';
import type { A2aRemoteAgentRow } from '../../store/repositories/a2a.js';
import type { RegistrationRequest } from '../../wire/agents.js';
import {
  CHAT_ACKNOWLEDGEMENT_DIGEST,
  CHAT_MESSAGE_DIGEST,
  CHAT_PROTOCOL_DIGEST,
  ChatAcknowledgementPayload,
  ChatMessagePayload,
} from '../../wire/chat.js';
import type { AgentsService } from '../agents.js';
import type { OwnAddressBook } from '../almanac.js';
import type { Courier } from '../courier.js';
import type { DeliveryTrace } from '../deliveries.js';
import type { AdmittedEnvelope } from '../envelopes.js';
import type { LocalRecipient } from '../mailbox.js';
import type { UsageService } from '../usage.js';
import { messageUuid } from '../mailbox.js';
import type { ExternalA2aCalls } from './external-call.js';
import { skillsReadme, type CardReader, type ReadCard } from './external-card.js';

export interface ExternalA2aPolicy {
  /** How long the envelopes Agentry sends for an external agent stay valid (seconds). */
  envelopeLifetimeSeconds: number;
  /** This service's public URL: an agent served here is no external one. */
  publicUrl: string;
}

/** The limits of a listing (src/wire/agents.ts): a card's longer texts are cut to them. */
const NAME_MAX = 32;
const DESCRIPTION_MAX = 300;
const README_MAX = 80_000;
/** How many addresses found not to be external agents a process remembers. */
const STRANGERS_KEPT = 50_000;
/** How many messages' uuids are remembered, so that one sent again is answered once. */
const REMEMBERED_MESSAGES = 10_000;

const notFound = (address: string) => new NotFoundError(`External A2A agent ${address} not found`);

/**
 * External A2A agents (docs/a2a.md, "Inward"): an agent that speaks A2A elsewhere,
 * registered by its card's URL, is listed here under an `agent1…` address whose key Agentry
 * holds (sealed at rest, as chat identities' are). The Almanac resolves that address to this
 * service's mailbox endpoint; what uAgents agents send it arrives there, has no mailbox to go
 * to, and is handed here: a chat message is acknowledged, said to the A2A agent with
 * `message/send`, and its answer sent back as a chat message, each leg in the agent's trace.
 */
export class ExternalA2aAgents
  implements OwnAddressBook, LocalRecipient, ChangeConsumer<'agent.deleted'>
{
  readonly kinds = ['agent.deleted'] as const;
  /** Addresses known to be external agents (never changed once made; gone when deleted). */
  private readonly known = new Set<string>();
  /**
   * Addresses found not to be external agents: an external agent's address is a key made when
   * it is registered, so none asked for before can become one.
   */
  private readonly strangers = new RecentSet<string>(STRANGERS_KEPT);
  /** Keys opened, by address. */
  private readonly keys = new Map<string, SigningKey>();
  /** The latest messages taken, by uuid: a message submitted again is not answered again. */
  private readonly taken = new Set<string>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly sealing: HostingKey,
    private readonly agents: AgentsService,
    private readonly usage: UsageService,
    private readonly reader: CardReader,
    private readonly calls: ExternalA2aCalls,
    private readonly courier: Courier,
    private readonly trace: DeliveryTrace,
    private readonly logger: Logger,
    private readonly policy: ExternalA2aPolicy,
  ) {}

  // ---- The owner's ----------------------------------------------------------------------

  /**
   * Registers the agent whose card is at `card_url`: its card read and checked first, then in
   * one transaction its identity, its listing (no mailbox), its search entry and its record.
   */
  async register(principal: Principal, request: { card_url: string }): Promise<A2aRemoteAgentRow> {
    const ownerId = ownerOf(principal);
    const known = await this.store.repos.a2a.findRemoteByCard(ownerId, request.card_url);
    if (known) {
      throw new ConflictError(
        `This card is registered already, as ${known.address}: read it again with POST /v2/a2a/external-agents/${known.address}/refresh`,
      );
    }
    const read = await this.readElsewhere(request.card_url);
    const key = SigningKey.generate();
    const now = this.clock.now();
    const row: A2aRemoteAgentRow = {
      address: key.address,
      owner_id: ownerId,
      card_url: request.card_url,
      card: read.json,
      rpc_url: read.rpcUrl,
      protocol_version: read.protocolVersion,
      key_ciphertext: seal(this.sealing.get(), key.privateKeyHex(), sealContext(key.address)),
      card_read_at: now,
      created_at: now,
    };
    await this.agents.registerHeld(ownerId, listingOf(key.address, read.card), (tx) =>
      tx.a2a.addRemote(row),
    );
    this.known.add(row.address);
    this.keys.set(row.address, key);
    return row;
  }

  list(
    principal: Principal,
    page: { limit: number; offset: number },
  ): Promise<A2aRemoteAgentRow[]> {
    return this.store.repos.a2a.listRemote(ownerOf(principal), page.limit, page.offset);
  }

  /** The caller's external agent; 404 for another's, as for none. */
  async get(principal: Principal, address: string): Promise<A2aRemoteAgentRow> {
    const row = await this.store.repos.a2a.findRemote(address);
    if (!row || principal.kind !== 'user' || row.owner_id !== principal.userId) {
      throw notFound(address);
    }
    return row;
  }

  /**
   * Reads the card again: a changed card changes the listing (name, description, skills, its
   * search entry) and where the agent is called. A card that no longer passes is refused (422)
   * and the one kept stays.
   */
  async refresh(principal: Principal, address: string): Promise<A2aRemoteAgentRow> {
    const row = await this.get(principal, address);
    const read: ReadCard = await this.readElsewhere(row.card_url);
    const listing = listingOf(address, read.card);
    const changes = {
      card: read.json,
      rpc_url: read.rpcUrl,
      protocol_version: read.protocolVersion,
      card_read_at: this.clock.now(),
    };
    await this.agents.update(
      row.owner_id,
      { address, name: listing.name, profile: listing.profile! },
      (tx) => tx.a2a.updateRemoteCard(address, changes),
    );
    return { ...row, ...changes };
  }

  /** Deletes the agent as any agent is deleted (its record goes with its listing). */
  async unregister(principal: Principal, address: string): Promise<void> {
    const row = await this.get(principal, address);
    await this.agents.delete(row.owner_id, address);
    this.forget(address);
  }

  // ---- The Almanac ----------------------------------------------------------------------

  /** An external agent speaks the chat protocol (and is reached at this service's mailbox). */
  protocolsOf(address: string): string[] | undefined | Promise<string[] | undefined> {
    if (this.known.has(address)) return [CHAT_PROTOCOL_DIGEST];
    if (this.strangers.has(address)) return undefined;
    return this.readProtocolsOf(address);
  }

  private async readProtocolsOf(address: string): Promise<string[] | undefined> {
    if (!(await this.store.repos.a2a.findRemote(address))) {
      this.strangers.add(address);
      return undefined;
    }
    this.known.add(address);
    return [CHAT_PROTOCOL_DIGEST];
  }

  heard(change: ChangeOf<'agent.deleted'>): void {
    this.forget(change.address);
  }

  private forget(address: string): void {
    this.known.delete(address);
    this.keys.delete(address);
  }

  // ---- The road in ----------------------------------------------------------------------

  /**
   * An envelope for an external agent, verified as any. A chat message is taken at once (the
   * sender's submit answers) and then acknowledged, said to the A2A agent and answered; an
   * acknowledgement is taken; anything else is refused (400), and nothing is kept of it.
   */
  async receive(admitted: AdmittedEnvelope): Promise<boolean> {
    const remote = await this.store.repos.a2a.findRemote(admitted.target);
    if (!remote) return false;
    const { envelope } = admitted;
    const body = decodePayload(envelope.payload);
    if (
      envelope.schema_digest === CHAT_ACKNOWLEDGEMENT_DIGEST &&
      Value.Check(ChatAcknowledgementPayload, body)
    ) {
      return true;
    }
    if (envelope.schema_digest !== CHAT_MESSAGE_DIGEST || !Value.Check(ChatMessagePayload, body)) {
      throw new BadRequestError(
        'An external A2A agent takes chat protocol messages and acknowledgements only (AgentChatProtocol 0.3.0)',
      );
    }
    const uuid = messageUuid(envelope, admitted.digest);
    if (this.taken.has(uuid)) return true;
    // Counted as a message to any agent of the owner's is: past the quota, refused (406).
    await this.usage.chargeMessage(remote.owner_id);
    this.remember(uuid);
    const heard: Heard = {
      uuid,
      digest: this.trace.digestOf(admitted.digest),
      size: Buffer.byteLength(JSON.stringify(envelope)),
      envelope,
      payload: body,
    };
    await this.recordTaken(remote, heard);
    // As the chat protocol expects: acknowledged, and answered, after the sender's answer.
    setImmediate(() => {
      void this.converse(remote, heard).catch((err: unknown) => {
        this.logger.warn({ err, agent: remote.address }, 'external A2A agent not asked');
      });
    });
    return true;
  }

  /** Acknowledges the message, asks the A2A agent, and sends its answer (or why none) back. */
  private async converse(remote: A2aRemoteAgentRow, heard: Heard): Promise<void> {
    const { envelope, payload } = heard;
    const sender = envelope.sender;
    const session = envelope.session ?? randomUUID();
    await this.send(remote, sender, session, CHAT_ACKNOWLEDGEMENT_DIGEST, {
      timestamp: new Date(this.clock.now()).toISOString(),
      acknowledged_msg_id: payload.msg_id,
    } satisfies ChatAcknowledgementPayload);
    const text = payload.content
      .flatMap((part) => (part.type === 'text' ? [part.text] : []))
      .join('');
    // A session's start or end alone, or a file, says nothing the A2A agent could answer.
    if (text.trim() === '') return;
    // The conversation's session is the A2A context: one conversation, one context there.
    const outcome = await this.calls.ask(remote, session, text);
    await this.recordCall(remote, heard, outcome);
    const answer = outcome.ok
      ? outcome.text
      : `Your message could not be answered: the A2A agent "${nameOf(remote)}" ${outcome.told}.`;
    await this.send(remote, sender, session, CHAT_MESSAGE_DIGEST, {
      timestamp: new Date(this.clock.now()).toISOString(),
      msg_id: randomUUID(),
      content: [{ type: 'text', text: answer }],
    } satisfies ChatMessagePayload);
  }

  /** Signs a chat envelope from the external agent and delivers it as a uAgents sender would. */
  private async send(
    remote: A2aRemoteAgentRow,
    to: string,
    session: string,
    schemaDigest: string,
    payload: unknown,
  ): Promise<void> {
    const envelope: EnvelopeFields = this.keyOf(remote).signEnvelope({
      version: 1,
      sender: remote.address,
      target: to,
      session,
      schema_digest: schemaDigest,
      protocol_digest: CHAT_PROTOCOL_DIGEST,
      payload: Buffer.from(JSON.stringify(payload), 'utf8').toString('base64'),
      expires: Math.floor(this.clock.now() / 1000) + this.policy.envelopeLifetimeSeconds,
      nonce: randomInt(2 ** 47),
    });
    const failure = await this.courier.deliver(to, envelope);
    if (failure !== undefined) {
      this.logger.info(
        { agent: remote.address, to, schema: schemaDigest, failure },
        'message of an external A2A agent not delivered',
      );
    }
  }

  // ---- The trace ------------------------------------------------------------------------

  /** The message arrived and is the A2A agent's to answer: `submitted`, then `delivered`. */
  private async recordTaken(remote: A2aRemoteAgentRow, heard: Heard): Promise<void> {
    if (!this.trace.enabled) return;
    const at = this.clock.now();
    const row = {
      address: remote.address,
      at,
      uuid: heard.uuid,
      digest: heard.digest,
      sender: heard.envelope.sender,
      size: heard.size,
    };
    await this.trace.record([
      { ...row, event: 'submitted', detail: null },
      { ...row, event: 'delivered', detail: `to the A2A agent at ${remote.rpc_url}` },
    ]);
  }

  /** The A2A call: `forwarded`, with how long it took and why it failed when it did. */
  private async recordCall(
    remote: A2aRemoteAgentRow,
    heard: Heard,
    outcome: { ok: boolean; latencyMs: number; statusCode: number | null; error?: string },
  ): Promise<void> {
    if (!this.trace.enabled) return;
    await this.trace.record([
      {
        address: remote.address,
        event: 'forwarded',
        at: this.clock.now(),
        uuid: heard.uuid,
        digest: heard.digest,
        sender: heard.envelope.sender,
        size: heard.size,
        // What the agent's endpoint last answered: a task it failed came with a 200.
        status_code: outcome.statusCode,
        latency_ms: Math.round(outcome.latencyMs),
        detail: outcome.ok
          ? `message/send to ${remote.rpc_url}: answered`
          : `message/send to ${remote.rpc_url}: ${outcome.error}`,
      },
    ]);
  }

  // ---- Helpers --------------------------------------------------------------------------

  /**
   * The card, refused when the agent is served by this service itself: uAgents agents reach
   * those at their own addresses, and a message would go round in circles.
   */
  private async readElsewhere(cardUrl: string): Promise<ReadCard> {
    const here = new URL(this.policy.publicUrl).origin;
    const read = await this.reader.read(cardUrl);
    if (new URL(read.rpcUrl).origin === here) {
      throw RequestValidationError.single(
        ['body', 'card_url'],
        `This card names an A2A interface of this service (${read.rpcUrl}): its agent is reached at its own agent address, not as an external agent`,
      );
    }
    return read;
  }

  private keyOf(remote: Pick<A2aRemoteAgentRow, 'address' | 'key_ciphertext'>): SigningKey {
    let key = this.keys.get(remote.address);
    if (!key) {
      key = SigningKey.fromHex(
        unseal(this.sealing.get(), remote.key_ciphertext, sealContext(remote.address)),
      );
      this.keys.set(remote.address, key);
    }
    return key;
  }

  private remember(uuid: string): void {
    this.taken.add(uuid);
    if (this.taken.size > REMEMBERED_MESSAGES) this.taken.delete(this.taken.values().next().value!);
  }
}

/** A chat message taken for an external agent. */
interface Heard {
  uuid: string;
  digest: string | null;
  size: number;
  envelope: EnvelopeFields;
  payload: ChatMessagePayload;
}

/** The listing an external agent has: its card's name, description, and skills as a readme. */
function listingOf(address: string, card: AgentCard): RegistrationRequest {
  return {
    address,
    name: cut(card.name.trim(), NAME_MAX),
    agent_type: 'a2a',
    profile: {
      description: cut(card.description ?? '', DESCRIPTION_MAX),
      readme: cut(skillsReadme(card.skills ?? []), README_MAX),
    },
    endpoints: [],
    protocols: [CHAT_PROTOCOL_DIGEST],
    // Nothing is forwarded to it: what it is sent is answered here.
    keep_failed_forwards: false,
  };
}

/** The name the agent's card gives. */
function nameOf(remote: Pick<A2aRemoteAgentRow, 'card'>): string {
  const name = (JSON.parse(remote.card) as { name?: unknown }).name;
  return typeof name === 'string' ? name : '';
}

function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function ownerOf(principal: Principal): string {
  if (principal.kind !== 'user') throw new NotFoundError('External A2A agent not found');
  return principal.userId;
}

function sealContext(address: string): string {
  return `a2a-remote:${address}`;
}

function decodePayload(payload: string | null | undefined): unknown {
  if (payload == null) return undefined;
  try {
    return JSON.parse(Buffer.from(payload, 'base64').toString('utf8'));
  } catch {
    return undefined;
  }
}
