import { memberOf, type UserPrincipal } from '../auth/principal.js';
import type { ChangeConsumer, ChangeOf } from '../infra/change-feed.js';
import type { Clock } from '../infra/clock.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/index.js';
import type { KeysService } from './keys.js';
import type { SessionsService } from './sessions.js';

/** Why an open stream ended before its client closed it. */
export type EndReason =
  | 'key_revoked'
  | 'signed_out'
  | 'member_removed'
  | 'team_deleted'
  | 'agent_deleted'
  | 'access_ended';

/** The last event of a stream ended for its holder: why, in a word and in a sentence. */
export interface AccessEnded {
  reason: EndReason;
  detail: string;
}

/** The end of a stream whose agent is no longer its owner's. */
export function agentDeleted(address: string): AccessEnded {
  return {
    reason: 'agent_deleted',
    detail: `Agent ${address} was deleted by its owner; its history went with it`,
  };
}

/** The end of a stream whose team membership ended. */
const MEMBER_REMOVED: AccessEnded = {
  reason: 'member_removed',
  detail: 'The member this stream was opened by is no longer a member of its team',
};

/** What let a stream be opened: the caller's credential and, for one agent's, that agent. */
export interface Grant {
  principal: UserPrincipal;
  /** The agent the stream is about, and when its owner (the principal's) registered it. */
  agent?: { address: string; since: number };
}

interface Held {
  grant: Grant;
  end: (ended: AccessEnded) => void;
  timer: NodeJS.Timeout | undefined;
}

/** The longest a timer waits (Node's limit); a later expiry is met by a look made later. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The credentials behind open streams (docs/keys.md, "Open streams"). Every stream a user
 * holds open (an agent's timeline, all of a user's, a console's) is held here with what let
 * it open, and ends, with a last event saying why, as soon as that no longer holds: its key
 * is revoked or expires, its console session ends, its team membership ends, the team goes,
 * or the agent it follows is deleted (its next owner's entries are never its). Changes are
 * heard on the change feed, from this process at once and from the others through the
 * database's notifications; {@link recheck}, run on a timer and whenever notifications may
 * have been missed, looks at every held credential again (changes the command line makes, on
 * SQLite, reach a serving process only so).
 */
/** What ends open streams. */
type AccessChange =
  'key.revoked' | 'session.ended' | 'member.removed' | 'team.deleted' | 'agent.deleted';

export class AccessWatch implements ChangeConsumer<AccessChange> {
  private readonly held = new Set<Held>();
  /** Streams of one agent, by address: the changes heard most often are about agents. */
  private readonly byAgent = new Map<string, Set<Held>>();

  constructor(
    private readonly store: Store,
    private readonly keys: KeysService,
    private readonly sessions: SessionsService,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  readonly kinds = [
    'key.revoked',
    'session.ended',
    'member.removed',
    'team.deleted',
    'agent.deleted',
  ] as const;

  heard(change: ChangeOf<AccessChange>): void {
    switch (change.kind) {
      case 'key.revoked':
        return this.endWhere((p) => p.keyId === change.keyId, {
          reason: 'key_revoked',
          detail: 'The API key this stream was opened with was revoked',
        });
      case 'session.ended':
        return this.endWhere((p) => p.sessionId === change.sessionId, {
          reason: 'signed_out',
          detail: 'The console session this stream was opened in has ended',
        });
      case 'member.removed':
        return this.endWhere(
          (p) => p.userId === change.teamId && memberOf(p) === change.userId,
          MEMBER_REMOVED,
        );
      case 'team.deleted':
        return this.endWhere((p) => p.userId === change.teamId, {
          reason: 'team_deleted',
          detail: 'The team this stream was opened for was deleted',
        });
      case 'agent.deleted':
        for (const held of [...(this.byAgent.get(change.address) ?? [])]) {
          this.finish(held, agentDeleted(change.address));
        }
    }
  }

  /** Changes may have been missed: every held credential is looked at again. */
  missed(): void {
    void this.recheck();
  }

  /**
   * Holds a stream's grant until the function answered is called (the stream closed); `end`
   * is called once if access ends first, and the stream must then end. The grant is looked at
   * once more as it is held: whatever changed between the request's authentication and now
   * (before any change could be heard for it) ends it too.
   */
  hold(grant: Grant, end: (ended: AccessEnded) => void): () => void {
    const held: Held = { grant, end, timer: undefined };
    this.held.add(held);
    if (grant.agent) {
      let set = this.byAgent.get(grant.agent.address);
      if (!set) this.byAgent.set(grant.agent.address, (set = new Set()));
      set.add(held);
    }
    const { principal } = grant;
    const expiresAt = Math.min(
      principal.keyExpiresAt ?? Infinity,
      principal.sessionExpiresAt ?? Infinity,
    );
    if (expiresAt !== Infinity) {
      const wait = Math.min(MAX_TIMER_MS, Math.max(0, expiresAt - this.clock.now()));
      held.timer = setTimeout(() => void this.recheck([held]), wait);
      held.timer.unref();
    }
    void this.recheck([held]);
    return () => this.release(held);
  }

  /**
   * Looks again at what allows each held stream (all of them unless told), with one read per
   * credential, membership and agent, and ends those it no longer allows. Answers how many
   * ended.
   */
  async recheck(which: Iterable<Held> = this.held): Promise<number> {
    const list = [...which].filter((held) => this.held.has(held));
    if (list.length === 0) return 0;
    const keyRefusals = new Map<string, Promise<string | undefined>>();
    const sessionRefusals = new Map<string, Promise<string | undefined>>();
    const memberships = new Map<string, Promise<boolean>>();
    const addresses = new Set<string>();
    for (const { grant } of list) {
      const p = grant.principal;
      if (p.sessionId !== undefined) {
        if (!sessionRefusals.has(p.sessionId)) {
          sessionRefusals.set(p.sessionId, this.sessions.standing(p.sessionId));
        }
      } else if (!keyRefusals.has(p.keyId)) {
        keyRefusals.set(p.keyId, this.keys.standing(p.keyId));
      }
      const member = p.team?.actingUserId;
      const key = member && `${p.userId} ${member}`;
      if (key && !memberships.has(key)) {
        memberships.set(key, this.store.repos.teams.isMember(p.userId, member));
      }
      if (grant.agent) addresses.add(grant.agent.address);
    }
    let ended = 0;
    try {
      const owners = await this.store.repos.deliveries.owners([...addresses]);
      for (const held of list) {
        const p = held.grant.principal;
        const refusal = await (p.sessionId !== undefined
          ? sessionRefusals.get(p.sessionId)
          : keyRefusals.get(p.keyId));
        const member = p.team?.actingUserId;
        const agent = held.grant.agent;
        const owner = agent && owners.get(agent.address);
        let why: AccessEnded | undefined;
        if (refusal !== undefined) {
          why = { reason: 'access_ended', detail: refusal };
        } else if (member && !(await memberships.get(`${p.userId} ${member}`))) {
          why = MEMBER_REMOVED;
        } else if (agent && (owner?.userId !== p.userId || owner.since !== agent.since)) {
          why = agentDeleted(agent.address);
        }
        if (why && this.held.has(held)) {
          this.finish(held, why);
          ended += 1;
        }
      }
    } catch (err) {
      // Looked at again on the next round.
      this.logger.warn({ err }, 'the credentials of open streams could not be checked');
    }
    return ended;
  }

  private endWhere(match: (principal: UserPrincipal) => boolean, ended: AccessEnded): void {
    for (const held of [...this.held]) if (match(held.grant.principal)) this.finish(held, ended);
  }

  private finish(held: Held, ended: AccessEnded): void {
    if (!this.held.has(held)) return;
    this.release(held);
    this.logger.debug({ reason: ended.reason }, 'stream ended: its access ended');
    held.end(ended);
  }

  private release(held: Held): void {
    if (!this.held.delete(held)) return;
    clearTimeout(held.timer);
    const address = held.grant.agent?.address;
    if (address === undefined) return;
    const set = this.byAgent.get(address);
    set?.delete(held);
    if (set?.size === 0) this.byAgent.delete(address);
  }
}
