import type { Logger } from '../logger.js';

/**
 * Something a commit changed that others react to (docs/architecture.md, "After a commit"):
 * published once the commit is done, heard by every subscriber of its kind in this process
 * and, through the database's notifications, in every other process on the same database.
 * Each is plain data, small enough for one notification.
 */
export type Change =
  /** An API key was revoked: it, and the console sessions opened with it, stop at once. */
  | { kind: 'key.revoked'; keyId: string }
  /** A console session ended (signed out); `sessionId` is its token's hash. */
  | { kind: 'session.ended'; sessionId: string }
  /** A member left a team or was removed from it. */
  | { kind: 'member.removed'; teamId: string; userId: string }
  /** A team was deleted, and its keys with it. */
  | { kind: 'team.deleted'; teamId: string }
  /** An agent's registration was deleted (its history went with it). */
  | { kind: 'agent.deleted'; address: string; userId: string };

export type ChangeKind = Change['kind'];
export type ChangeOf<K extends ChangeKind> = Extract<Change, { kind: K }>;

/** How changes travel to and from the other processes on the same database. */
export interface RemoteChanges {
  /** Sends what this process published; never waits and never throws. */
  send(changes: readonly Change[]): void;
}

type Handler = (change: Change) => void;

const KINDS: Record<ChangeKind, true> = {
  'key.revoked': true,
  'session.ended': true,
  'member.removed': true,
  'team.deleted': true,
  'agent.deleted': true,
};

/** Whether a value heard from elsewhere is a change this process knows (a newer one may not be). */
export function isChange(value: unknown): value is Change {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { kind?: unknown }).kind === 'string' &&
    Object.hasOwn(KINDS, (value as { kind: string }).kind)
  );
}

/**
 * The one road from a commit to whatever reacts to it. Writers {@link publish} after their
 * commit; consumers {@link subscribe} to the kinds they care about. A handler runs at once, in
 * the publisher's turn, so that nothing this process does after a publish can come before its
 * consumers have heard (a stream is ended before the next entry could be sent on it); a
 * handler that throws is logged and does not stop the others.
 */
export class ChangeFeed {
  private readonly handlers = new Map<ChangeKind, Set<Handler>>();
  private readonly missedHandlers = new Set<() => void>();
  private remote: RemoteChanges | undefined;

  constructor(private readonly logger: Logger) {}

  /** Where this process's changes go to reach the others (PostgreSQL's notifications). */
  connect(remote: RemoteChanges): void {
    this.remote = remote;
  }

  subscribe<K extends ChangeKind>(
    kinds: readonly K[],
    handler: (change: ChangeOf<K>) => void,
  ): () => void {
    const untyped = handler as Handler;
    for (const kind of kinds) {
      let set = this.handlers.get(kind);
      if (!set) this.handlers.set(kind, (set = new Set()));
      set.add(untyped);
    }
    return () => {
      for (const kind of kinds) this.handlers.get(kind)?.delete(untyped);
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

  /** Tells this process's subscribers, then the other processes. Call after the commit. */
  publish(changes: readonly Change[]): void {
    if (changes.length === 0) return;
    this.deliver(changes);
    this.remote?.send(changes);
  }

  /** Changes another process published, told to this process's subscribers. */
  heard(changes: readonly Change[]): void {
    this.deliver(changes);
  }

  private deliver(changes: readonly Change[]): void {
    for (const change of changes) {
      for (const handler of this.handlers.get(change.kind) ?? []) {
        try {
          handler(change);
        } catch (err) {
          this.logger.error({ err, change: change.kind }, 'a change consumer failed');
        }
      }
    }
  }
}
