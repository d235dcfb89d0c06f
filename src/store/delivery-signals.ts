import { createHash } from 'node:crypto';
import pg from 'pg';
import {
  isChange,
  type Change,
  type ChangeFeed,
  type RemoteChanges,
} from '../infra/change-feed.js';
import type { DeliveryNotifier } from '../infra/delivery-notifier.js';
import type { Logger } from '../logger.js';
import { postgresConnection } from './database.js';

/**
 * Tells held mailbox polls that something happened to their mailbox (a message committed, the
 * mailbox removed), in this process and in every other process serving the same database.
 */
export interface DeliverySignals {
  /**
   * Call after the commit; never waits and never throws. `observed`: this process's activity
   * streams were handed the committed rows already (other processes' streams read them).
   */
  announce(addresses: Iterable<string>, observed?: boolean): void;
  /**
   * Something other than a message happened to these agents (their activity streams look
   * again; held polls do not). Call after the commit; never waits and never throws.
   */
  announceActivity(addresses: Iterable<string>): void;
  close(): Promise<void>;
}

/** One process alone (SQLite): the announcement goes straight to the local notifier. */
export function localDeliverySignals(notifier: DeliveryNotifier): DeliverySignals {
  return {
    announce: (addresses, observed) => notifier.wake(addresses, observed),
    announceActivity: (addresses) => notifier.wakeActivity(addresses),
    close: async () => {},
  };
}

/** The server process behind a connection (pg sets it on connect; its types leave it out). */
function backendOf(client: pg.Client): number | undefined {
  return (client as unknown as { processID?: number }).processID;
}

/** Marks a notification about an agent's activity rather than a message for it. */
const ACTIVITY = 'activity:';
/** Marks a notification that carries a change of the change feed, as JSON. */
const CHANGE = 'change:';

/** How long to wait before connecting again after the listening connection was lost. */
const RECONNECT_DELAY_MS = 1000;

/** The channel of a schema: every process on the same tables shares it, and only those. */
function channelFor(schema: string): string {
  const name = `agentry_mailbox.${schema}`;
  // Channel names are identifiers: at most 63 bytes.
  return Buffer.byteLength(name) <= 63
    ? name
    : `agentry_mailbox.${createHash('sha256').update(schema).digest('hex').slice(0, 40)}`;
}

/**
 * PostgreSQL: one connection per process, outside the pool, LISTENs on the schema's channel
 * and sends this process's announcements with `pg_notify` after the commit, never awaited by
 * the submitter (one statement at a time; what is announced meanwhile goes in the next).
 * Local polls are woken at once; notifications from this connection's own backend are
 * skipped when they come back. If the connection drops, every held poll looks again (a
 * notification may have been lost) and the connection is opened again a second later.
 */
export class PostgresDeliverySignals implements DeliverySignals, RemoteChanges {
  private client: pg.Client | undefined;
  private channel: string | undefined;
  private stopped = false;
  private retry: NodeJS.Timeout | undefined;
  private readonly unsent = new Set<string>();
  private sending = false;
  private readonly ready: Promise<void>;

  constructor(
    private readonly url: string,
    private readonly notifier: DeliveryNotifier,
    private readonly logger: Logger,
    /** Hears the changes other processes publish, and what may have been missed. */
    private readonly feed?: ChangeFeed,
  ) {
    this.ready = this.connect();
  }

  /** The changes this process published, for the others; sent as announcements are. */
  send(changes: readonly Change[]): void {
    for (const change of changes) this.unsent.add(`${CHANGE}${JSON.stringify(change)}`);
    if (!this.sending) void this.flush();
  }

  announce(addresses: Iterable<string>, observed = false): void {
    const list = [...new Set(addresses)];
    if (list.length === 0) return;
    this.notifier.wake(list, observed);
    for (const address of list) this.unsent.add(address);
    if (!this.sending) void this.flush();
  }

  announceActivity(addresses: Iterable<string>): void {
    const list = [...new Set(addresses)];
    if (list.length === 0) return;
    this.notifier.wakeActivity(list);
    for (const address of list) this.unsent.add(`${ACTIVITY}${address}`);
    if (!this.sending) void this.flush();
  }

  /**
   * Sends what was announced, one statement at a time: announcements made while one is on
   * its way go together in the next, so a burst of submits never queues more than one.
   */
  private async flush(): Promise<void> {
    this.sending = true;
    try {
      while (this.unsent.size > 0) {
        const { client, channel } = this;
        const addresses = [...this.unsent];
        this.unsent.clear();
        // Not listening (reconnecting): the other processes' polls look again at their limit.
        if (!client || !channel) return;
        await client
          .query('select pg_notify($1, address) from unnest($2::text[]) as address', [
            channel,
            addresses,
          ])
          .catch((err: unknown) => this.logger.warn({ err }, 'mailbox notification not sent'));
      }
    } finally {
      this.sending = false;
    }
  }

  private heard(json: string): void {
    let change: unknown;
    try {
      change = JSON.parse(json);
    } catch {
      return;
    }
    if (isChange(change)) this.feed?.heard([change]);
  }

  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    await this.ready;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }

  private async connect(): Promise<void> {
    const client = new pg.Client(postgresConnection(this.url));
    let lost = false;
    const onLost = (err?: unknown): void => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = undefined;
      void client.end().catch(() => {});
      if (this.stopped) return;
      this.logger.warn({ err }, 'mailbox notifications lost; listening again shortly');
      this.notifier.wakeAll();
      this.feed?.missed();
      this.retry = setTimeout(() => void this.connect(), RECONNECT_DELAY_MS);
      this.retry.unref();
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', (message) => {
      const { payload } = message;
      if (message.processId === backendOf(client) || !payload) return;
      if (payload.startsWith(CHANGE)) this.heard(payload.slice(CHANGE.length));
      else if (payload.startsWith(ACTIVITY))
        this.notifier.wakeActivity([payload.slice(ACTIVITY.length)]);
      else this.notifier.wake([payload]);
    });
    try {
      await client.connect();
      const { rows } = await client.query<{ schema: string }>('select current_schema() as schema');
      const channel = channelFor(rows[0]!.schema);
      await client.query(`listen ${client.escapeIdentifier(channel)}`);
      if (this.stopped) {
        await client.end();
        return;
      }
      this.channel = channel;
      this.client = client;
      // Whatever was committed while not listening: held polls look again.
      this.notifier.wakeAll();
      this.feed?.missed();
    } catch (err) {
      onLost(err);
    }
  }
}
