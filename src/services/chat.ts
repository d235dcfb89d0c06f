import { randomInt, randomUUID } from 'node:crypto';
import { Value } from '@sinclair/typebox/value';
import type { Principal } from '../auth/principal.js';
import type { EnvelopeFields } from '../crypto/index.js';
import { BadRequestError, ConflictError, NotFoundError } from '../errors.js';
import type { ChangeConsumer, ChangeFeed, ChangeOf } from '../infra/change-feed.js';
import type { Clock } from '../infra/clock.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/index.js';
import type {
  ChatEntryRow,
  ChatIdentityRow,
  ChatSessionRow,
  NewChatEntry,
} from '../store/repositories/chat.js';
import {
  CHAT_ACKNOWLEDGEMENT_DIGEST,
  CHAT_MESSAGE_DIGEST,
  CHAT_PROTOCOL_DIGEST,
  ChatAcknowledgementPayload,
  ChatMessagePayload,
  type ChatContent,
  type SendChatRequest,
} from '../wire/chat.js';
import { canonicalAgentAddress } from '../wire/formats.js';
import type { ChatIdentities } from './chat-identities.js';
import type { Courier } from './courier.js';
import type { AdmittedEnvelope } from './envelopes.js';
import type { SearchService } from './search.js';
import { chatEntryView } from '../views/chat.js';
import { ReplyReader, type ReplyPiece } from './chat-reply.js';
import type { UsageService } from './usage.js';

export interface ChatPolicy {
  /** This service's public URL: chat identities are reached at its mailbox submit endpoint. */
  publicUrl: string;
  /** How long the envelopes Agentry sends stay valid (seconds). */
  envelopeLifetimeSeconds: number;
}

/** What {@link ChatService.ask} came to: the message sent, and the reply as read. */
export interface ChatAsked {
  session: ChatSessionInfo;
  message: ChatEntryRow;
  reader: ReplyReader;
  /** No reply within the time given. */
  timedOut: boolean;
}

/** A session as its owner sees it, with the rows of what was said. */
export type ChatSessionInfo = ChatSessionRow;

/** Where a session's live streams are told of new entries. */
type ChatStream = {
  after: number;
  send: (row: ChatEntryRow) => void;
  reading: boolean;
  again: boolean;
};

/** Who a session is between: never changed once it is opened. */
type SessionParties = Pick<ChatSessionRow, 'id' | 'owner_id' | 'identity' | 'agent'>;

const SESSION_NOT_FOUND = 'Chat session not found';
/** What a health probe says to the agent. */
const PROBE_TEXT = 'Health check from Agentry: no answer is needed beyond the acknowledgement.';
/** How many sessions' parties a process keeps at most (the least recently used go first). */
const REMEMBERED_SESSIONS = 10_000;

/**
 * Chat for people (docs/chat.md): each user and team speaks from a chat identity of its own,
 * an agent key Agentry holds, to any agent that speaks the chat protocol. What is sent goes to
 * the agent by the road any envelope takes (its mailbox, its proxy URL, or its endpoint
 * elsewhere); what the agent sends back arrives at Agentry's mailbox endpoint, is verified like
 * any envelope, acknowledged as the protocol expects, kept, and told to the session's live
 * streams, in this process or another, through the change feed.
 */
export class ChatService implements ChangeConsumer<'chat.recorded'> {
  readonly kinds = ['chat.recorded'] as const;
  /** Open live streams, by session. */
  private readonly streams = new Map<string, Set<ChatStream>>();
  /**
   * What a reply is checked against (owner, identity, agent: never changed once opened), by
   * session id, for the sessions of this process's latest sends.
   */
  private readonly parties = new Map<string, SessionParties>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly identities: ChatIdentities,
    private readonly usage: UsageService,
    private readonly search: SearchService,
    private readonly courier: Courier,
    private readonly changes: ChangeFeed,
    private readonly logger: Logger,
    private readonly policy: ChatPolicy,
  ) {}

  // ---- Identities ------------------------------------------------------------------------

  /** The owner's chat identity, made the first time it is asked for. */
  identity(ownerId: string): Promise<ChatIdentityRow> {
    return this.identities.of(ownerId);
  }

  /** Where a chat identity is reached: this service's mailbox endpoint. */
  get endpoint(): string {
    return `${this.policy.publicUrl}/v2/agents/mailbox/submit`;
  }

  // ---- Sessions --------------------------------------------------------------------------

  /** Opens a session with the agent an address, name or handle names. */
  async open(principal: Principal, agent: string): Promise<ChatSessionInfo> {
    const ownerId = ownerOf(principal);
    const id = agent.trim();
    let address: string;
    let endpoints = 0;
    try {
      const entry = await this.search.resolve(id);
      address = entry.address;
      endpoints = entry.endpoints.length;
    } catch (err) {
      // An agent registered here that has not (yet) registered in the Almanac.
      const named = canonicalAgentAddress(id);
      if (!(err instanceof NotFoundError) || named === undefined) throw err;
      address = named;
    }
    if (endpoints === 0 && !(await this.reachableHere(address))) {
      throw new NotFoundError(
        `Agent ${address} cannot be reached: it has no mailbox or proxy here and no endpoint in the Almanac`,
      );
    }
    const identity = await this.identity(ownerId);
    const now = this.clock.now();
    const row: ChatSessionRow = {
      id: randomUUID(),
      owner_id: ownerId,
      identity: identity.address,
      agent: address,
      created_at: now,
      updated_at: now,
      ended_at: null,
    };
    await this.store.repos.chat.addSession(row);
    return row;
  }

  list(
    principal: Principal,
    page: { limit: number; offset: number; agent?: string },
  ): Promise<ChatSessionInfo[]> {
    return this.store.repos.chat.listSessions(ownerOf(principal), page);
  }

  /** The caller's session; 404 for another's, as for none. */
  async get(principal: Principal, id: string): Promise<ChatSessionInfo> {
    const session = await this.store.repos.chat.findSession(id);
    if (!session || session.owner_id !== ownerOf(principal)) {
      throw new NotFoundError(SESSION_NOT_FOUND);
    }
    return session;
  }

  /** A page of what was said in the session, oldest first, after the entry `after`. */
  async history(
    principal: Principal,
    id: string,
    after: number,
    limit: number,
  ): Promise<ChatEntryRow[]> {
    await this.get(principal, id);
    return this.store.repos.chat.entries(id, after, limit);
  }

  /**
   * Sends a message in the session (the first one of a session says it starts it); answers
   * its entry and, when it could not be delivered, the failure's.
   */
  async send(
    principal: Principal,
    id: string,
    message: SendChatRequest,
    msgId: string = randomUUID(),
  ): Promise<{ message: ChatEntryRow; failure: ChatEntryRow | null }> {
    const session = await this.get(principal, id);
    if (session.ended_at !== null) throw new ConflictError('This chat session has ended');
    const content: ChatContent[] = [];
    if (!(await this.store.repos.chat.hasAnyOutgoing(id))) content.push({ type: 'start-session' });
    if (message.text !== '') content.push({ type: 'text', text: message.text });
    for (const resource of message.resources ?? []) {
      content.push(await this.resourceContent(session, resource));
    }
    if (content.every((part) => part.type === 'start-session')) {
      throw new BadRequestError('A message needs text or a file');
    }
    return this.say(session, content, msgId);
  }

  /**
   * Says `text` to an agent and waits up to `timeoutMs` for its reply (docs/chat.md, "Waiting
   * for a reply"), in the session `target.session` names or in one opened with `target.agent`.
   * `progress` hears each step (sent, acknowledged, a streamed reply's chunks). Faces that
   * answer with the agent's reply (the MCP chat tool, A2A calls) ask through here.
   */
  async ask(
    principal: Principal,
    target: { session?: string; agent?: string },
    text: string,
    options: {
      timeoutMs: number;
      /** The chat message's id (a UUID); a new one unless given. */
      msgId?: string;
      signal?: AbortSignal;
      progress?: (step: string) => void;
      /** The agent acknowledged the message. */
      acknowledged?: () => void;
      /** What each entry of the agent's says, as the reply is read (a streamed reply's chunks). */
      pieces?: (pieces: ReplyPiece[], reader: ReplyReader) => void;
    },
  ): Promise<ChatAsked> {
    let session: ChatSessionInfo;
    if (target.session !== undefined) {
      session = await this.get(principal, target.session);
      const named = target.agent === undefined ? undefined : await this.addressOf(target.agent);
      if (named !== undefined && named !== session.agent) {
        throw new BadRequestError(
          `Chat session ${session.id} is with ${session.agent}, not ${named}`,
        );
      }
    } else if (target.agent !== undefined) {
      session = await this.open(principal, target.agent);
    } else {
      throw new BadRequestError('Name the agent, or the session to continue');
    }
    const sent = await this.send(principal, session.id, { text }, options.msgId);
    const reader = new ReplyReader(sent.message.msg_id!);
    if (sent.failure) {
      reader.take(chatEntryView(sent.failure));
      return { session, message: sent.message, reader, timedOut: false };
    }
    options.progress?.(`Sent to ${session.agent}; waiting for its reply`);
    const timedOut = await new Promise<boolean>((resolve) => {
      let settled = false;
      const finish = (late: boolean): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', aborted);
        stop();
        resolve(late);
      };
      const aborted = (): void => finish(false);
      const timer = setTimeout(() => finish(true), options.timeoutMs);
      options.signal?.addEventListener('abort', aborted, { once: true });
      const stop = this.follow(session.id, Number(sent.message.id), (row) => {
        const wasAcknowledged = reader.acknowledged;
        const pieces = reader.take(chatEntryView(row));
        if (pieces.length > 0) options.pieces?.(pieces, reader);
        if (!wasAcknowledged && reader.acknowledged) {
          options.acknowledged?.();
          options.progress?.(`${session.agent} acknowledged the message`);
        }
        if (reader.outcome === 'streaming') options.progress?.(`${session.agent} is replying`);
        if (reader.done) finish(false);
      });
      if (options.signal?.aborted) finish(false);
    });
    return { session, message: sent.message, reader, timedOut };
  }

  /**
   * Sends one message of any model to an agent from the owner's chat identity, signed and
   * delivered as a chat message is, outside any chat session: the envelope's session is a new
   * id, which the delivery trace knows it by. What the agent answers to it is not kept (the chat
   * identity takes chat messages alone). Answers the envelope's session id and, when it could
   * not be delivered, why.
   */
  async sendMessage(
    principal: Principal,
    agent: string,
    message: { schemaDigest: string; protocolDigest?: string; payload: unknown },
  ): Promise<{ to: string; messageId: string; failure: string | null }> {
    const ownerId = ownerOf(principal);
    const to = await this.addressOf(agent);
    await this.usage.chargeMessage(ownerId);
    const identity = await this.identity(ownerId);
    const parties = { id: randomUUID(), owner_id: ownerId, identity: identity.address, agent: to };
    const envelope = this.envelope(
      identity,
      parties,
      message.schemaDigest,
      message.payload,
      message.protocolDigest,
    );
    const failure = await this.courier.deliver(to, envelope);
    return { to, messageId: parties.id, failure: failure ?? null };
  }

  /** The address an address, name or handle names, as `open` finds it. */
  private async addressOf(agent: string): Promise<string> {
    const address = canonicalAgentAddress(agent.trim());
    if (address !== undefined) return address;
    return (await this.search.resolve(agent.trim())).address;
  }

  /** Ends the session: the agent is told so, and nothing more can be sent in it. */
  async end(principal: Principal, id: string): Promise<ChatSessionInfo> {
    const session = await this.get(principal, id);
    if (session.ended_at !== null) return session;
    await this.say(session, [{ type: 'end-session' }]);
    await this.store.repos.chat.endSession(id, this.clock.now());
    return (await this.store.repos.chat.findSession(id))!;
  }

  /**
   * A health probe (docs/activity.md, "Health"): the chat message `msgId`, from the owner's chat
   * identity to the agent, in the session given (opened with the first probe) as any message
   * the owner sends. Answers the session, and why the message could not be delivered, if so;
   * the agent answers it by acknowledging it.
   */
  async probe(
    ownerId: string,
    agent: string,
    sessionId: string | null,
    msgId: string,
  ): Promise<{ sessionId: string; failure: string | null }> {
    let session =
      sessionId === null ? undefined : await this.store.repos.chat.findSession(sessionId);
    if (
      !session ||
      session.owner_id !== ownerId ||
      session.agent !== agent ||
      session.ended_at !== null
    ) {
      const identity = await this.identity(ownerId);
      const now = this.clock.now();
      session = {
        id: randomUUID(),
        owner_id: ownerId,
        identity: identity.address,
        agent,
        created_at: now,
        updated_at: now,
        ended_at: null,
      };
      await this.store.repos.chat.addSession(session);
    }
    const content: ChatContent[] = [];
    if (!(await this.store.repos.chat.hasAnyOutgoing(session.id)))
      content.push({ type: 'start-session' });
    content.push({ type: 'text', text: PROBE_TEXT });
    const { failure } = await this.say(session, content, msgId);
    return { sessionId: session.id, failure: failure?.detail ?? null };
  }

  /** Writes a message from the owner, sends it, and tells the streams of both. */
  private async say(
    session: ChatSessionRow,
    content: ChatContent[],
    msgId: string = randomUUID(),
  ): Promise<{ message: ChatEntryRow; failure: ChatEntryRow | null }> {
    await this.usage.chargeMessage(session.owner_id);
    const identity = (await this.identities.at(session.identity))!;
    this.remember(session);
    const now = this.clock.now();
    const payload: ChatMessagePayload = {
      timestamp: new Date(now).toISOString(),
      msg_id: msgId,
      content,
    };
    const [message] = await this.record(session.id, [
      {
        session_id: session.id,
        at: now,
        direction: 'out',
        kind: 'message',
        msg_id: msgId,
        content: JSON.stringify(content),
        detail: null,
      },
    ]);
    const envelope = this.envelope(identity, session, CHAT_MESSAGE_DIGEST, payload);
    const failure = await this.courier.deliver(session.agent, envelope);
    if (failure === undefined) return { message: message!, failure: null };
    const [failed] = await this.record(session.id, [
      {
        session_id: session.id,
        at: this.clock.now(),
        direction: 'out',
        kind: 'failure',
        msg_id: msgId,
        content: null,
        detail: failure,
      },
    ]);
    return { message: message!, failure: failed! };
  }

  // ---- Envelopes -------------------------------------------------------------------------

  /** A signed envelope from the session's identity to its agent. */
  private envelope(
    identity: ChatIdentityRow,
    session: SessionParties,
    schemaDigest: string,
    payload: unknown,
    protocolDigest: string | undefined = CHAT_PROTOCOL_DIGEST,
  ): EnvelopeFields {
    return this.identities.keyOf(identity).signEnvelope({
      version: 1,
      sender: identity.address,
      target: session.agent,
      session: session.id,
      schema_digest: schemaDigest,
      ...(protocolDigest !== undefined && { protocol_digest: protocolDigest }),
      payload: Buffer.from(JSON.stringify(payload), 'utf8').toString('base64'),
      expires: Math.floor(this.clock.now() / 1000) + this.policy.envelopeLifetimeSeconds,
      nonce: randomInt(2 ** 47),
    });
  }

  // ---- The road in -----------------------------------------------------------------------

  /**
   * An envelope for a chat identity, verified as any (the mailbox hands on those whose target
   * has no mailbox). Answers false when its target is not a chat identity. A chat message is
   * kept and acknowledged; an acknowledgement is kept; anything else, or a message from an
   * agent the session did not speak to, is refused (400), and nothing is kept of it.
   */
  async receive(admitted: AdmittedEnvelope): Promise<boolean> {
    const identity = await this.identities.at(admitted.target);
    if (!identity) return false;
    const { envelope } = admitted;
    const session = envelope.session == null ? undefined : await this.partiesOf(envelope.session);
    if (!session || session.identity !== identity.address || session.agent !== envelope.sender) {
      throw new BadRequestError(
        'Not a reply in a chat session: this chat identity has no session with the sender under this session id',
      );
    }
    const body = decodePayload(envelope.payload);
    const now = this.clock.now();
    if (envelope.schema_digest === CHAT_MESSAGE_DIGEST && Value.Check(ChatMessagePayload, body)) {
      if (await this.store.repos.chat.hasEntry(session.id, 'in', 'message', body.msg_id)) {
        return true;
      }
      await this.usage.chargeMessage(session.owner_id);
      await this.record(session.id, [
        {
          session_id: session.id,
          at: now,
          direction: 'in',
          kind: 'message',
          msg_id: body.msg_id,
          content: JSON.stringify(body.content),
          detail: null,
        },
      ]);
      // As the protocol expects: the message is acknowledged, after the sender's answer.
      const ack = this.envelope(identity, session, CHAT_ACKNOWLEDGEMENT_DIGEST, {
        timestamp: new Date(now).toISOString(),
        acknowledged_msg_id: body.msg_id,
      } satisfies ChatAcknowledgementPayload);
      setImmediate(() => {
        void this.courier.deliver(session.agent, ack).then((failure) => {
          if (failure)
            this.logger.info(
              { session: session.id, failure },
              'chat acknowledgement not delivered',
            );
        });
      });
      return true;
    }
    if (
      envelope.schema_digest === CHAT_ACKNOWLEDGEMENT_DIGEST &&
      Value.Check(ChatAcknowledgementPayload, body)
    ) {
      const msgId = body.acknowledged_msg_id;
      if (await this.store.repos.chat.hasEntry(session.id, 'in', 'acknowledgement', msgId)) {
        return true;
      }
      await this.record(session.id, [
        {
          session_id: session.id,
          at: now,
          direction: 'in',
          kind: 'acknowledgement',
          msg_id: msgId,
          content: null,
          detail: body.metadata ? JSON.stringify(body.metadata) : null,
        },
      ]);
      return true;
    }
    throw new BadRequestError(
      'A chat identity takes chat protocol messages and acknowledgements only (AgentChatProtocol 0.3.0)',
    );
  }

  /** Keeps entries of a session and tells its streams, here and in the other processes. */
  private async record(sessionId: string, rows: NewChatEntry[]): Promise<ChatEntryRow[]> {
    const stored = await this.store.repos.chat.addEntries(rows);
    await this.store.repos.chat.touchSession(sessionId, this.clock.now());
    void this.changes.publish([{ kind: 'chat.recorded', sessionId }]);
    return stored;
  }

  // ---- Live ------------------------------------------------------------------------------

  /**
   * Follows a session: `send` gets each entry after `after`, oldest first, as it is kept here
   * or in another process. Answers the function that stops following.
   */
  follow(sessionId: string, after: number, send: (row: ChatEntryRow) => void): () => void {
    const stream: ChatStream = { after, send, reading: false, again: false };
    let set = this.streams.get(sessionId);
    if (!set) this.streams.set(sessionId, (set = new Set()));
    set.add(stream);
    void this.readFor(sessionId, stream);
    return () => {
      const streams = this.streams.get(sessionId);
      streams?.delete(stream);
      if (streams?.size === 0) this.streams.delete(sessionId);
    };
  }

  heard(change: ChangeOf<'chat.recorded'>): void {
    for (const stream of this.streams.get(change.sessionId) ?? []) {
      void this.readFor(change.sessionId, stream);
    }
  }

  /** Changes may have been missed: every stream reads again. */
  missed(): void {
    for (const [sessionId, streams] of this.streams) {
      for (const stream of streams) void this.readFor(sessionId, stream);
    }
  }

  /** Open live streams (read by the metrics and tests). */
  get following(): number {
    let count = 0;
    for (const streams of this.streams.values()) count += streams.size;
    return count;
  }

  /** Reads what is new for one stream; a read asked for meanwhile runs after it. */
  private async readFor(sessionId: string, stream: ChatStream): Promise<void> {
    if (stream.reading) {
      stream.again = true;
      return;
    }
    stream.reading = true;
    try {
      do {
        stream.again = false;
        for (;;) {
          const rows = await this.store.repos.chat.entries(sessionId, stream.after, 100);
          for (const row of rows) {
            stream.after = row.id;
            stream.send(row);
          }
          if (rows.length < 100) break;
        }
      } while (stream.again);
    } catch (err) {
      this.logger.warn({ err, session: sessionId }, 'chat stream not read');
    } finally {
      stream.reading = false;
    }
  }

  // ---- Helpers ---------------------------------------------------------------------------

  /** Keeps who a session is between, for the replies to come. */
  private remember(session: SessionParties): void {
    const { id, owner_id, identity, agent } = session;
    this.parties.delete(id);
    this.parties.set(id, { id, owner_id, identity, agent });
    if (this.parties.size > REMEMBERED_SESSIONS) {
      this.parties.delete(this.parties.keys().next().value!);
    }
  }

  /** Who the session is between, when there is one. */
  private async partiesOf(id: string): Promise<SessionParties | undefined> {
    const known = this.parties.get(id);
    if (known) return known;
    const found = await this.store.repos.chat.findSession(id);
    if (found) this.remember(found);
    return found;
  }

  /** Whether the agent has a mailbox or proxy here. */
  private async reachableHere(address: string): Promise<boolean> {
    return (await this.store.repos.agents.findForwarding(address)) !== undefined;
  }

  /**
   * A file as the chat protocol carries it (docs/storage.md): a storage asset of the owner's,
   * named `agent-storage://<host>/<asset id>`, which the session's agent is allowed to read.
   */
  private async resourceContent(
    session: ChatSessionRow,
    resource: { asset_id: string; role?: string },
  ): Promise<ChatContent> {
    const { storageAssets } = this.store.repos;
    const asset = await storageAssets.find(resource.asset_id);
    if (!asset || asset.user_id !== session.owner_id || asset.expires_at <= this.clock.now()) {
      throw new NotFoundError(`Storage asset ${resource.asset_id} not found`);
    }
    const existing = (await storageAssets.listPermissions(asset.id, session.agent, 1, 0)).rows[0];
    await storageAssets.setPermission({
      asset_id: asset.id,
      agent_address: session.agent,
      can_read: 1,
      can_write: existing?.can_write ?? 0,
      created_at: existing?.created_at ?? this.clock.now(),
    });
    return {
      type: 'resource',
      resource_id: asset.id,
      resource: {
        uri: `agent-storage://${new URL(this.policy.publicUrl).host}/${asset.id}`,
        metadata: {
          mime_type: asset.mime_type ?? 'application/octet-stream',
          role: resource.role ?? 'attachment',
        },
      },
    };
  }
}

/** The chat identity belongs to the user, or to the team the principal acts for. */
function ownerOf(principal: Principal): string {
  if (principal.kind !== 'user') throw new NotFoundError(SESSION_NOT_FOUND);
  return principal.userId;
}

function decodePayload(payload: string | null | undefined): unknown {
  if (payload == null) return undefined;
  try {
    return JSON.parse(Buffer.from(payload, 'base64').toString('utf8'));
  } catch {
    return undefined;
  }
}
