import { randomUUID } from 'node:crypto';
import type { UserPrincipal } from '../auth/principal.js';
import { NotFoundError } from '../errors.js';
import type { ChangeConsumer, ChangeFeed, ChangeOf } from '../infra/change-feed.js';
import type { Clock } from '../infra/clock.js';
import type { Store } from '../store/index.js';
import type { McpSessionRow } from '../store/repositories/mcp-sessions.js';

export interface McpSessionsPolicy {
  /** A session unused this long ends (its client initializes again, as the protocol says). */
  idleMs: number;
}

/** What an MCP client said of itself when it initialized the session. */
export interface McpClientInfo {
  name: string | undefined;
  version: string | undefined;
  protocolVersion: string;
}

/** What a process remembers of a session it checked: who may use it, and when it looked. */
interface Remembered {
  ownerId: string;
  keyId: string;
  checkedAt: number;
  touchedAt: number;
}

/**
 * How long a process trusts what it read of a session before reading it again: the bound on
 * how late it hears of an end where no notification reaches it (SQLite's other processes).
 */
const RECHECK_MS = 1000;
/** How often a session's last use is written (a session used at once is still in use). */
const TOUCH_MS = 60_000;
/** How many sessions a process remembers at most (the least recently checked go first). */
const REMEMBERED = 10_000;

/** The answer the protocol names for a session id that is not (or no longer) one. */
export const MCP_SESSION_NOT_FOUND =
  'MCP session not found: it ended, was idle too long, or belongs to another key; initialize a new one';

/**
 * MCP sessions (docs/mcp.md). A session is opened by an MCP client's `initialize` and bound to
 * the API key (and the owner, with `x-team`) that made it: every later request must carry the
 * same. Sessions are rows, so any process on the database answers any session's requests
 * (replicas need no affinity); a process remembers what it read for a few seconds, and forgets
 * at once a session ended anywhere (the change feed tells it).
 */
export class McpSessionsService implements ChangeConsumer<'mcp.ended'> {
  readonly kinds = ['mcp.ended'] as const;
  private readonly remembered = new Map<string, Remembered>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly changes: ChangeFeed,
    private readonly policy: McpSessionsPolicy,
  ) {}

  /** Opens a session for the principal's key; answers its id. */
  async open(principal: UserPrincipal, client: McpClientInfo): Promise<string> {
    const now = this.clock.now();
    const row: McpSessionRow = {
      id: randomUUID(),
      owner_id: principal.userId,
      key_id: principal.keyId,
      client_name: client.name ?? null,
      client_version: client.version ?? null,
      protocol_version: client.protocolVersion,
      created_at: now,
      last_seen_at: now,
    };
    await this.store.repos.mcpSessions.insert(row);
    this.remember(row.id, {
      ownerId: row.owner_id,
      keyId: row.key_id,
      checkedAt: now,
      touchedAt: now,
    });
    return row.id;
  }

  /**
   * Checks that `id` is a session of the principal's key and owner, and notes its use; a 404
   * (the protocol's answer) for any other id.
   */
  async use(principal: UserPrincipal, id: string): Promise<void> {
    const now = this.clock.now();
    let known = this.remembered.get(id);
    if (known === undefined || now - known.checkedAt > RECHECK_MS) {
      const row = await this.store.repos.mcpSessions.find(id);
      if (row === undefined || now - row.last_seen_at > this.policy.idleMs) {
        this.remembered.delete(id);
        throw new NotFoundError(MCP_SESSION_NOT_FOUND);
      }
      known = {
        ownerId: row.owner_id,
        keyId: row.key_id,
        checkedAt: now,
        touchedAt: row.last_seen_at,
      };
      this.remember(id, known);
    }
    if (known.keyId !== principal.keyId || known.ownerId !== principal.userId) {
      throw new NotFoundError(MCP_SESSION_NOT_FOUND);
    }
    if (now - known.touchedAt >= TOUCH_MS) {
      known.touchedAt = now;
      await this.store.repos.mcpSessions.touch(id, now);
    }
  }

  /** Ends the principal's session (the client's DELETE); a 404 for any other id. */
  async end(principal: UserPrincipal, id: string): Promise<void> {
    await this.use(principal, id);
    await this.forget(id);
  }

  /**
   * The owner's sessions (with any of its keys), the most recently used first: the assistants
   * connected. Those idle past the limit are over, even before the sweep removes them.
   */
  async list(principal: UserPrincipal, limit = 100): Promise<McpSessionRow[]> {
    const since = this.clock.now() - this.policy.idleMs;
    const rows = await this.store.repos.mcpSessions.listByOwner(principal.userId, limit);
    return rows.filter((row) => row.last_seen_at >= since);
  }

  /** Ends one of the owner's sessions, whichever key opened it (the owner's console); 404 else. */
  async endOwned(principal: UserPrincipal, id: string): Promise<void> {
    const row = await this.store.repos.mcpSessions.find(id);
    if (row === undefined || row.owner_id !== principal.userId) {
      throw new NotFoundError('MCP session not found');
    }
    await this.forget(id);
  }

  /** Deletes a session, here and in what every process remembers of it. */
  private async forget(id: string): Promise<void> {
    await this.store.repos.mcpSessions.delete(id);
    this.remembered.delete(id);
    void this.changes.publish([{ kind: 'mcp.ended', sessionId: id }]);
  }

  /** How many sessions are open across all owners, and how many were used in the last hour. */
  async counts(): Promise<{ open: number; lastHour: number }> {
    const now = this.clock.now();
    const [open, lastHour] = await Promise.all([
      this.store.repos.mcpSessions.countUsedSince(now - this.policy.idleMs),
      this.store.repos.mcpSessions.countUsedSince(now - 3_600_000),
    ]);
    return { open, lastHour };
  }

  /** Removes sessions idle past the limit (a housekeeping task). */
  purgeIdle(): Promise<number> {
    return this.store.repos.mcpSessions.deleteIdle(this.clock.now() - this.policy.idleMs);
  }

  heard(change: ChangeOf<'mcp.ended'>): void {
    this.remembered.delete(change.sessionId);
  }

  /** Changes may have been missed: what was read is read again. */
  missed(): void {
    this.remembered.clear();
  }

  private remember(id: string, known: Remembered): void {
    this.remembered.delete(id);
    this.remembered.set(id, known);
    if (this.remembered.size > REMEMBERED) {
      this.remembered.delete(this.remembered.keys().next().value!);
    }
  }
}
