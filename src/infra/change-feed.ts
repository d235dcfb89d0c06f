import type { Logger } from '../logger.js';
import type { StoredMessage, TimelineRow } from '../store/repositories/activity.js';

/**
 * Something that happened to an agent, a key or a team, that others react to
 * (docs/architecture.md, "After a commit"): published once the commit that made it is done,
 * heard by every consumer of its kind in this process and, for the kinds that travel, through
 * the database's notifications in every other process on the same database.
 *
 * A change is plain data. What only the publishing process has (the rows it just wrote, handed
 * on without being read back) goes in `local`, which never leaves the process: a consumer that
 * must act once per change (a webhook, a status row) acts where `local` is present, and a
 * consumer in another process hears the same change without it.
 */
export type Change =
  // ---- Mailboxes (held polls, live streams) ----
  /** Messages were committed to these agents' mailboxes. */
  | {
      kind: 'message.stored';
      addresses: readonly string[];
      local?: { messages: readonly StoredMessage[] };
    }
  /** These agents' mailboxes were removed (their registrations deleted): held polls answer. */
  | { kind: 'mailbox.removed'; addresses: readonly string[] }
  // ---- Timelines (live streams, webhooks) ----
  /**
   * Entries were added to these agents' timelines (activity or delivery-trace rows): `rows`,
   * when the publisher has what they say (not for polls and deletions, which webhooks skip).
   */
  | {
      kind: 'timeline.recorded';
      addresses: readonly string[];
      local?: { rows: readonly TimelineRow[] };
    }
  // ---- Presence (what the activity service makes of it; this process only) ----
  /**
   * The agent showed it runs: it polled its mailbox, called with its attestation, or signed an
   * Almanac write; `worked` when it did more than wait (was handed a message, acknowledged one);
   * `poll` when a poll of its mailbox began or ended: when it began, and when it ends (held) or
   * ended.
   */
  | {
      kind: 'agent.seen';
      address: string;
      by: 'poll' | 'call' | 'almanac';
      at: number;
      worked?: boolean;
      poll?: { started: number; until: number };
    }
  /** A forward of the proxy to the agent's URL went well or not. */
  | { kind: 'forward.attempted'; address: string; ok: boolean; error: string | null }
  /**
   * Almanac registrations were stored; `changed`: those new or declaring something new;
   * `agents`: those of `addresses` registered here as agents when they were stored (answered by
   * the statement that stored them, so that what only registered agents have, timelines and
   * kept forwards, costs nothing for the many that are not).
   */
  | {
      kind: 'almanac.registered';
      addresses: readonly string[];
      changed: readonly { address: string; endpoints: string[]; isNew: boolean }[];
      agents: readonly string[];
    }
  /** The agent told the Almanac it is active or not. */
  | { kind: 'almanac.status'; address: string; active: boolean; signedAt: number }
  // ---- Hosted agents (runners) ----
  /** An owner asked for a hosted agent to start or stop, gave it code or deleted it. */
  | { kind: 'hosting.changed' }
  // ---- Chat (live sessions) ----
  /** Entries were added to a chat session (a message, an acknowledgement, a failure). */
  | { kind: 'chat.recorded'; sessionId: string }
  // ---- Access (open streams) ----
  /** An API key was revoked: it, and the console sessions opened with it, stop at once. */
  | { kind: 'key.revoked'; keyId: string }
  /** A console session ended (signed out); `sessionId` is its token's hash. */
  | { kind: 'session.ended'; sessionId: string }
  /** An MCP client ended its session, or it was found idle too long. */
  | { kind: 'mcp.ended'; sessionId: string }
  /** A member left a team or was removed from it. */
  | { kind: 'member.removed'; teamId: string; userId: string }
  /** A team was deleted, and its keys with it. */
  | { kind: 'team.deleted'; teamId: string }
  /** An agent's registration was deleted (its history went with it). */
  | { kind: 'agent.deleted'; address: string; userId: string };

export type ChangeKind = Change['kind'];
export type ChangeOf<K extends ChangeKind> = Extract<Change, { kind: K }>;

/**
 * Whether each kind travels to the other processes, and how. `address`: one notification per
 * agent carrying its address alone (the mailbox's, the busiest road, as small as it can be;
 * `prefix` tells the kinds apart); `json`: the change as JSON (less frequent changes whose
 * fields all matter); `stays`: heard in this process only (what it reacts to, it records, and
 * the other processes hear of that through its timeline changes).
 */
const ROADS: Record<ChangeKind, { road: 'address'; prefix: string } | { road: 'json' | 'stays' }> =
  {
    'message.stored': { road: 'address', prefix: '' },
    'mailbox.removed': { road: 'json' },
    'timeline.recorded': { road: 'address', prefix: 'activity:' },
    'agent.seen': { road: 'stays' },
    'forward.attempted': { road: 'stays' },
    'almanac.registered': { road: 'stays' },
    'almanac.status': { road: 'stays' },
    'hosting.changed': { road: 'json' },
    'chat.recorded': { road: 'json' },
    'key.revoked': { road: 'json' },
    'session.ended': { road: 'json' },
    'mcp.ended': { road: 'json' },
    'member.removed': { road: 'json' },
    'team.deleted': { road: 'json' },
    'agent.deleted': { road: 'json' },
  };

/** Marks a notification that carries a change as JSON. */
const JSON_PREFIX = 'change:';

/**
 * The notifications that tell the other processes of `change` (none for a kind that stays).
 * Its `local` part is left out.
 */
export function notificationsOf(change: Change): string[] {
  const road = ROADS[change.kind];
  if (road.road === 'stays') return [];
  if (road.road === 'address') {
    const { addresses } = change as ChangeOf<'message.stored' | 'timeline.recorded'>;
    return road.prefix === '' ? [...addresses] : addresses.map((a) => `${road.prefix}${a}`);
  }
  const { local: _local, ...shared } = change as Change & { local?: unknown };
  return [`${JSON_PREFIX}${JSON.stringify(shared)}`];
}

/** The change a notification of another process carries; undefined for one this process does not know. */
export function changeOfNotification(payload: string): Change | undefined {
  if (payload.startsWith(JSON_PREFIX)) {
    let value: unknown;
    try {
      value = JSON.parse(payload.slice(JSON_PREFIX.length));
    } catch {
      return undefined;
    }
    const kind = (value as { kind?: unknown } | null)?.kind;
    // A newer process may publish kinds this one does not know: they are not for it.
    return typeof kind === 'string' &&
      Object.hasOwn(ROADS, kind) &&
      ROADS[kind as ChangeKind].road === 'json'
      ? (value as Change)
      : undefined;
  }
  if (payload.startsWith('activity:')) {
    return { kind: 'timeline.recorded', addresses: [payload.slice('activity:'.length)] };
  }
  return payload.includes(':') ? undefined : { kind: 'message.stored', addresses: [payload] };
}

/** How changes travel to and from the other processes on the same database. */
export interface RemoteChanges {
  /** Sends the notifications of what this process published; never waits and never throws. */
  send(notifications: readonly string[]): void;
  /**
   * Settles once the first attempt to hear the other processes has ended, heard or not (a
   * failed one is tried again, and what was missed meanwhile looked at again once it is heard).
   */
  listening(): Promise<void>;
}

/**
 * Something that reacts to changes: the kinds it hears, declared where it is written, and
 * what it does with each. `heard` may answer a promise: a publisher that awaits
 * {@link ChangeFeed.publish} waits for it (an Almanac status update answers once its activity
 * row is written). `missed` runs when changes of other processes may have been missed (the
 * connection that hears them was lost): what depends on them looks again.
 */
export interface ChangeConsumer<K extends ChangeKind = ChangeKind> {
  readonly kinds: readonly K[];
  heard(change: ChangeOf<K>): void | Promise<unknown>;
  missed?(): void;
}

type Handler = (change: Change) => void | Promise<unknown>;

const DONE: Promise<void> = Promise.resolve();

/**
 * The one road from a commit to whatever reacts to it. Writers {@link publish} after their
 * commit; consumers {@link attach} (or {@link subscribe} to) the kinds they care about. A
 * handler runs at once, in the publisher's turn, so that nothing this process does after a
 * publish can come before its consumers have heard (a held poll is woken, a stream is ended,
 * before the next request is read); a handler that throws or rejects is logged and does not
 * stop the others.
 */
export class ChangeFeed {
  private readonly handlers = new Map<ChangeKind, Handler[]>();
  private readonly missedHandlers = new Set<() => void>();
  private remote: RemoteChanges | undefined;

  constructor(private readonly logger: Logger) {}

  /** Where this process's changes go to reach the others (PostgreSQL's notifications). */
  connect(remote: RemoteChanges): void {
    this.remote = remote;
  }

  /**
   * Settles once the road to the other processes is open, if there is one: a process that
   * answered before would neither hear their changes nor tell them its own (a submit to it
   * would not wake a poll held by another until the road opened).
   */
  listening(): Promise<void> {
    return this.remote?.listening() ?? Promise.resolve();
  }

  /** Starts telling `consumer` of the kinds it declares; answers the call that stops it. */
  attach<K extends ChangeKind>(consumer: ChangeConsumer<K>): () => void {
    const stop = this.subscribe(consumer.kinds, (change) => consumer.heard(change));
    const missed = consumer.missed;
    const stopMissed = missed ? this.onMissed(() => missed.call(consumer)) : undefined;
    return () => {
      stop();
      stopMissed?.();
    };
  }

  subscribe<K extends ChangeKind>(
    kinds: readonly K[],
    handler: (change: ChangeOf<K>) => void | Promise<unknown>,
  ): () => void {
    const untyped = handler as Handler;
    for (const kind of kinds) {
      // Copied on change, so that a delivery under way runs over the list it started with.
      this.handlers.set(kind, [...(this.handlers.get(kind) ?? []), untyped]);
    }
    return () => {
      for (const kind of kinds) {
        this.handlers.set(
          kind,
          (this.handlers.get(kind) ?? []).filter((h) => h !== untyped),
        );
      }
    };
  }

  /**
   * `handler` runs whenever changes of other processes may have been missed (the connection
   * that hears them was lost): what depends on them looks again.
   */
  onMissed(handler: () => void): () => void {
    this.missedHandlers.add(handler);
    return () => this.missedHandlers.delete(handler);
  }

  /** Changes of other processes may have been missed. */
  missed(): void {
    for (const handler of this.missedHandlers) {
      try {
        handler();
      } catch (err) {
        this.logger.error({ err }, 'a change consumer failed to look again');
      }
    }
  }

  /**
   * Tells this process's consumers, then the other processes. Call after the commit. The
   * promise answered settles once the consumers that answered promises are done (it never
   * rejects): await it where the caller's answer should follow their work.
   */
  publish(changes: readonly Change[]): Promise<void> {
    if (changes.length === 0) return DONE;
    const pending = this.deliver(changes);
    if (this.remote) {
      const notifications: string[] = [];
      for (const change of changes) notifications.push(...notificationsOf(change));
      if (notifications.length > 0) this.remote.send(notifications);
    }
    return pending;
  }

  /** Changes another process published, told to this process's consumers. */
  heard(changes: readonly Change[]): void {
    void this.deliver(changes);
  }

  private deliver(changes: readonly Change[]): Promise<void> {
    let waits: Promise<unknown>[] | undefined;
    for (const change of changes) {
      const handlers = this.handlers.get(change.kind);
      if (handlers === undefined) continue;
      for (const handler of handlers) {
        try {
          const result = handler(change);
          if (result !== undefined) {
            (waits ??= []).push(
              result.catch((err: unknown) =>
                this.logger.error({ err, change: change.kind }, 'a change consumer failed'),
              ),
            );
          }
        } catch (err) {
          this.logger.error({ err, change: change.kind }, 'a change consumer failed');
        }
      }
    }
    return waits === undefined ? DONE : Promise.all(waits).then(() => undefined);
  }
}
