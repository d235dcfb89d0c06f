import { createHash } from 'node:crypto';
import pg from 'pg';
import { changeOfNotification, type ChangeFeed, type RemoteChanges } from '../infra/change-feed.js';
import type { Logger } from '../logger.js';
import { postgresConnection } from './database.js';

/** The server process behind a connection (pg sets it on connect; its types leave it out). */
function backendOf(client: pg.Client): number | undefined {
  return (client as unknown as { processID?: number }).processID;
}

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
 * The change feed's road between processes on PostgreSQL: one connection per process, outside
 * the pool, LISTENs on the schema's channel and sends the notifications of this process's
 * changes with `pg_notify` after the commit, never awaited by the publisher (one statement at
 * a time; what is published meanwhile goes in the next, and the same notification twice goes
 * once). Notifications from this connection's own backend are skipped when they come back.
 * If the connection drops, the feed's consumers are told that changes may have been missed
 * (held polls and streams look again) and the connection is opened again a second later.
 */
export class PostgresChangeRelay implements RemoteChanges {
  private client: pg.Client | undefined;
  private channel: string | undefined;
  private stopped = false;
  private retry: NodeJS.Timeout | undefined;
  private readonly unsent = new Set<string>();
  private sending = false;
  private readonly ready: Promise<void>;

  constructor(
    private readonly url: string,
    private readonly feed: ChangeFeed,
    private readonly logger: Logger,
  ) {
    this.ready = this.connect();
  }

  listening(): Promise<void> {
    return this.ready;
  }

  send(notifications: readonly string[]): void {
    for (const notification of notifications) this.unsent.add(notification);
    if (!this.sending) void this.flush();
  }

  /**
   * Sends what was published, one statement at a time: notifications added while one is on
   * its way go together in the next, so a burst of submits never queues more than one.
   */
  private async flush(): Promise<void> {
    this.sending = true;
    try {
      while (this.unsent.size > 0) {
        const { client, channel } = this;
        const payloads = [...this.unsent];
        this.unsent.clear();
        // Not listening (reconnecting): the other processes look again when they hear it is back.
        if (!client || !channel) return;
        await client
          .query('select pg_notify($1, payload) from unnest($2::text[]) as payload', [
            channel,
            payloads,
          ])
          .catch((err: unknown) => this.logger.warn({ err }, 'change notification not sent'));
      }
    } finally {
      this.sending = false;
    }
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
      this.logger.warn({ err }, 'change notifications lost; listening again shortly');
      this.feed.missed();
      this.retry = setTimeout(() => void this.connect(), RECONNECT_DELAY_MS);
      this.retry.unref();
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', (message) => {
      const { payload } = message;
      if (message.processId === backendOf(client) || !payload) return;
      const change = changeOfNotification(payload);
      if (change) this.feed.heard([change]);
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
      // Whatever was committed while not listening: held polls and streams look again.
      this.feed.missed();
    } catch (err) {
      onLost(err);
    }
  }
}
