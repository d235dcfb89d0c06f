import type { Insertable, Kysely, Selectable, Updateable } from 'kysely';
import type { DialectName } from '../dialect.js';
import type { Database, WebhookDeliveriesTable, WebhooksTable } from '../schema.js';
import { atomically, deleteAgentHistory, slices } from '../statements.js';

export type WebhookRow = Selectable<WebhooksTable>;
export type NewWebhookRow = Insertable<WebhooksTable>;
export type WebhookChanges = Pick<
  Updateable<WebhooksTable>,
  'url' | 'kinds' | 'agents' | 'description' | 'updated_at'
>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;
export type NewWebhookDelivery = Insertable<WebhookDeliveriesTable>;

/** A delivery claimed for an attempt, with what sending it needs of its hook. */
export interface ClaimedDelivery {
  id: string;
  webhook_id: string;
  kind: string;
  address: string | null;
  payload: string;
  attempts: number;
  created_at: number;
  /** The lease this claim holds; the outcome is written only while it still does. */
  claimed_until: number;
  redelivery_of: string | null;
  user_id: string;
  url: string;
  secret: string;
}

/** How an attempt ended, as its delivery keeps it. */
export interface AttemptOutcome {
  status: 'pending' | 'delivered' | 'failed';
  status_code: number | null;
  error: string | null;
  at: number;
  /** When the next attempt is due (pending only). */
  next_attempt_at: number | null;
  /** What the attempt sent and was answered. */
  exchange: AttemptExchange;
}

/** An attempt's exchange with the receiver, as its delivery keeps it (JSON as text). */
export interface AttemptExchange {
  request_headers: string;
  /** Null when nothing was answered. */
  response_headers: string | null;
  response_body: string | null;
  duration_ms: number;
}

/**
 * Users' webhooks and the queue of their deliveries. A delivery is claimed by one process at a
 * time through a lease: on PostgreSQL, the rows a claim picks are locked and skipped by any
 * other claim running at the same moment; on SQLite, one statement holds the write lock.
 */
export class WebhooksRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectName,
  ) {}

  async insert(row: NewWebhookRow): Promise<void> {
    await this.db.insertInto('webhooks').values(row).execute();
  }

  /** The user's hooks, oldest first. */
  listForUser(userId: string): Promise<WebhookRow[]> {
    return this.db
      .selectFrom('webhooks')
      .selectAll()
      .where('user_id', '=', userId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  async countForUser(userId: string): Promise<number> {
    const row = await this.db
      .selectFrom('webhooks')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('user_id', '=', userId)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /** A hook, whoever's it is. */
  findById(id: string): Promise<WebhookRow | undefined> {
    return this.db.selectFrom('webhooks').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** One of the user's hooks; undefined when there is none of theirs by that id. */
  find(id: string, userId: string): Promise<WebhookRow | undefined> {
    return this.db
      .selectFrom('webhooks')
      .selectAll()
      .where('id', '=', id)
      .where('user_id', '=', userId)
      .executeTakeFirst();
  }

  /** Changes one of the user's hooks; the hook as it is now, or undefined when it is not theirs. */
  update(id: string, userId: string, changes: WebhookChanges): Promise<WebhookRow | undefined> {
    return this.db
      .updateTable('webhooks')
      .set(changes)
      .where('id', '=', id)
      .where('user_id', '=', userId)
      .returningAll()
      .executeTakeFirst();
  }

  /** Deletes one of the user's hooks with all its deliveries; false when it is not theirs. */
  remove(id: string, userId: string): Promise<boolean> {
    return atomically(this.db, async (db) => {
      const removed = await db
        .deleteFrom('webhooks')
        .where('id', '=', id)
        .where('user_id', '=', userId)
        .executeTakeFirst();
      if (Number(removed.numDeletedRows) === 0) return false;
      await db.deleteFrom('webhook_deliveries').where('webhook_id', '=', id).execute();
      return true;
    });
  }

  async enqueue(rows: NewWebhookDelivery[]): Promise<void> {
    for (const slice of slices(rows, 200)) {
      await this.db.insertInto('webhook_deliveries').values(slice).execute();
    }
  }

  /** How many deliveries of each of these hooks are still pending. */
  async pendingCounts(webhookIds: string[]): Promise<Map<string, number>> {
    if (webhookIds.length === 0) return new Map();
    const rows = await this.db
      .selectFrom('webhook_deliveries')
      .select(['webhook_id', (eb) => eb.fn.countAll<number>().as('count')])
      .where('webhook_id', 'in', webhookIds)
      .where('status', '=', 'pending')
      .groupBy('webhook_id')
      .execute();
    return new Map(rows.map((row) => [row.webhook_id, Number(row.count)]));
  }

  /**
   * Claims up to `limit` deliveries due at `now` (pending, and not held by a lease that has not
   * run out) until `leaseUntil`, the earliest due first, and answers them with their hooks.
   */
  async claimDue(now: number, leaseUntil: number, limit: number): Promise<ClaimedDelivery[]> {
    const claimed = await this.db
      .updateTable('webhook_deliveries')
      .set({ claimed_until: leaseUntil })
      .where('seq', 'in', (eb) =>
        eb
          .selectFrom('webhook_deliveries')
          .select('seq')
          .where('status', '=', 'pending')
          .where('next_attempt_at', '<=', now)
          .where((w) => w.or([w('claimed_until', 'is', null), w('claimed_until', '<', now)]))
          .orderBy('next_attempt_at')
          .limit(limit)
          .$if(this.dialect === 'postgres', (q) => q.forUpdate().skipLocked()),
      )
      .returning([
        'id',
        'webhook_id',
        'kind',
        'address',
        'payload',
        'attempts',
        'created_at',
        'redelivery_of',
      ])
      .execute();
    if (claimed.length === 0) return [];
    const hooks = await this.db
      .selectFrom('webhooks')
      .select(['id', 'user_id', 'url', 'secret'])
      .where('id', 'in', [...new Set(claimed.map((row) => row.webhook_id))])
      .execute();
    const byId = new Map(hooks.map((hook) => [hook.id, hook]));
    return claimed.flatMap((row) => {
      const hook = byId.get(row.webhook_id);
      // A hook deleted meanwhile took its deliveries with it.
      if (!hook) return [];
      return [
        {
          ...row,
          attempts: Number(row.attempts),
          created_at: Number(row.created_at),
          claimed_until: leaseUntil,
          user_id: hook.user_id,
          url: hook.url,
          secret: hook.secret,
        },
      ];
    });
  }

  /** Writes how an attempt ended, if the claim that made it still holds the delivery. */
  async settle(id: string, claimedUntil: number, outcome: AttemptOutcome): Promise<void> {
    await this.db
      .updateTable('webhook_deliveries')
      .set((eb) => ({
        status: outcome.status,
        attempts: eb('attempts', '+', 1),
        status_code: outcome.status_code,
        error: outcome.error,
        last_attempt_at: outcome.at,
        next_attempt_at: outcome.next_attempt_at,
        claimed_until: null,
        ...outcome.exchange,
      }))
      .where('id', '=', id)
      .where('claimed_until', '=', claimedUntil)
      .execute();
  }

  /** Gives claimed deliveries back unattempted (the process stops): another sends them. */
  async release(claims: { id: string; claimedUntil: number }[]): Promise<void> {
    for (const { id, claimedUntil } of claims) {
      await this.db
        .updateTable('webhook_deliveries')
        .set({ claimed_until: null })
        .where('id', '=', id)
        .where('claimed_until', '=', claimedUntil)
        .execute();
    }
  }

  /** Deletes a delivery that must not be sent (its agent changed hands). */
  async drop(id: string): Promise<void> {
    await this.db.deleteFrom('webhook_deliveries').where('id', '=', id).execute();
  }

  /** A delivery by its id; of the hook given only, when one is. */
  findDelivery(id: string, webhookId?: string): Promise<WebhookDeliveryRow | undefined> {
    return this.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('id', '=', id)
      .$if(webhookId !== undefined, (q) => q.where('webhook_id', '=', webhookId!))
      .executeTakeFirst();
  }

  /** A page of a hook's deliveries, newest first. */
  listDeliveries(
    webhookId: string,
    filter: { status?: string; limit: number; offset: number },
  ): Promise<WebhookDeliveryRow[]> {
    return this.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('webhook_id', '=', webhookId)
      .$if(filter.status !== undefined, (q) => q.where('status', '=', filter.status!))
      .orderBy('seq', 'desc')
      .limit(filter.limit)
      .offset(filter.offset)
      .execute();
  }

  /**
   * Deletes up to `limit` deliveries about the agent made up to `until` (when its listing was
   * deleted), and says how many went.
   */
  forgetAgent(address: string, until: number, limit: number): Promise<number> {
    return deleteAgentHistory(this.db, 'webhook_deliveries', address, until, limit);
  }

  /** Deletes up to `limit` deliveries made before `before` that are no longer pending. */
  async prune(before: number, limit: number): Promise<number> {
    const removed = await this.db
      .deleteFrom('webhook_deliveries')
      .where('seq', 'in', (eb) =>
        eb
          .selectFrom('webhook_deliveries')
          .select('seq')
          .where('created_at', '<', before)
          .where('status', '<>', 'pending')
          .limit(limit),
      )
      .executeTakeFirst();
    return Number(removed.numDeletedRows);
  }
}
