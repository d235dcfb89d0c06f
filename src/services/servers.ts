import { randomUUID } from 'node:crypto';
import type { Clock } from '../infra/clock.js';
import type { Store } from '../store/index.js';
import type { ServerRow } from '../store/repositories/servers.js';

/** How often a listening server says it is still there. */
export const SERVER_HEARTBEAT_MS = 30_000;
/** A server not heard of for this long ended without saying so (a crash, a lost machine). */
const SERVER_GONE_MS = 4 * SERVER_HEARTBEAT_MS;

/** A server process that listens on this database, as another process finds it. */
export interface ListeningServer {
  url: string;
  host: string;
  pid: number;
  startedAt: number;
  seenAt: number;
}

/**
 * Where the servers on this database listen: each serving process records its address once it
 * listens and removes it when it stops, so that `agentry status` run against the same database
 * finds it, whatever port it was given (several replicas: one row each).
 */
export class ServersService {
  /** This process's row, once it listens. */
  private row: ServerRow | undefined;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  /** Records that this process listens at `url` on the machine `host`. */
  async listening(url: string, host: string): Promise<void> {
    const now = this.clock.now();
    const row: ServerRow = {
      id: randomUUID(),
      url,
      host,
      pid: process.pid,
      started_at: now,
      seen_at: now,
    };
    await this.store.repos.servers.insert(row);
    this.row = row;
  }

  /**
   * Says this process is still there (its row comes back if another pruned it after a long
   * pause), and forgets the servers that ended without saying so.
   */
  async heartbeat(): Promise<void> {
    if (this.row === undefined) return;
    const now = this.clock.now();
    if (!(await this.store.repos.servers.touch(this.row.id, now))) {
      await this.store.repos.servers.insert({ ...this.row, seen_at: now });
    }
    await this.store.repos.servers.deleteUnseen(now - SERVER_GONE_MS);
  }

  /** Removes this process's row: it no longer listens. */
  async stopped(): Promise<void> {
    if (this.row === undefined) return;
    const { id } = this.row;
    this.row = undefined;
    await this.store.repos.servers.delete(id);
  }

  /** The servers that listen on this database, the most recently started first. */
  async listeningServers(): Promise<ListeningServer[]> {
    const rows = await this.store.repos.servers.seenSince(this.clock.now() - SERVER_GONE_MS);
    return rows.map((row) => ({
      url: row.url,
      host: row.host,
      pid: row.pid,
      startedAt: row.started_at,
      seenAt: row.seen_at,
    }));
  }
}
