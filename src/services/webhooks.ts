import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { request, type Dispatcher } from 'undici';
import {
  BadRequestError,
  ConflictError,
  NotFoundError,
  RequestValidationError,
} from '../errors.js';
import { inBatches } from '../infra/batches.js';
import type { Clock } from '../infra/clock.js';
import { PrivateTargetError, refusedTarget } from '../infra/outbound.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/index.js';
import type { TimelineRow } from '../store/repositories/activity.js';
import type {
  AttemptExchange,
  AttemptOutcome,
  ClaimedDelivery,
  NewWebhookDelivery,
  WebhookDeliveryRow,
  WebhookRow,
} from '../store/repositories/webhooks.js';
import { isoTimestamp } from '../wire/common.js';
import { GONE_STATUSES } from '../wire/activity.js';
import type {
  WebhookDeliveryKind,
  WebhookDeliveryStatus,
  WebhookKind,
  WebhookPayload,
} from '../wire/webhooks.js';
import type { ChangeConsumer, ChangeOf } from '../infra/change-feed.js';
import { timelineEntry } from '../views/activity.js';
import { isOutageFailure, kindOf } from '../views/timeline.js';
import { EXPIRED_UNFORWARDED_DETAIL } from '../store/repositories/deliveries.js';

/** Hooks one user may have. */
export const MAX_WEBHOOKS_PER_USER = 20;
/**
 * Deliveries one hook may have waiting; past it, new events for it are dropped (and counted),
 * so that a receiver that is down, or an agent flooded with refused messages, fills no disk.
 */
export const MAX_PENDING_PER_WEBHOOK = 1000;
/** Deliveries one process claims and sends at once. */
const CLAIM_BATCH = 20;
/** How often the sender looks for deliveries that came due (new ones are sent at once). */
const LOOP_MS = 1000;
/** A claim outlasts an attempt's timeout by this much, so that no other process takes it mid-way. */
const LEASE_MARGIN_MS = 30_000;
/** Text kept of why an attempt failed. */
const ERROR_MAX_LENGTH = 500;

const PRIVATE_TARGET_HINT =
  'set AGENTRY_ALLOW_PRIVATE_TARGETS=true (or start with --allow-private-targets) to allow local networks';

export interface WebhookPolicy {
  /** The wait before each retry; after the last, a delivery is given up (`failed`). */
  retryDelaysMs: number[];
  /** How long one attempt waits for the receiver's answer. */
  timeoutMs: number;
  /** How long delivered and failed deliveries are kept. */
  retentionMs: number;
  /** The `user-agent` of every delivery. */
  userAgent: string;
  /** Whether deliveries may go to private networks (the operator's setting, the guard's too). */
  allowPrivateTargets: boolean;
}

/** How an attempt ended, for the metrics: delivered, to be retried, given up; or never made. */
export type DeliveryOutcome = 'delivered' | 'retry' | 'failed' | 'dropped';

/** A hook as its owner sees it (never its secret, but when it is made). */
export interface WebhookInfo {
  id: string;
  url: string;
  kinds: WebhookKind[];
  agents: string[] | null;
  description: string | null;
  createdAt: number;
  updatedAt: number;
}

export interface WebhookFields {
  url: string;
  kinds: WebhookKind[];
  agents?: string[] | null;
  description?: string | null;
}

/** One delivery as its hook's owner sees it. */
export interface WebhookDeliveryInfo {
  id: string;
  kind: WebhookDeliveryKind;
  agent: string | null;
  status: WebhookDeliveryStatus;
  attempts: number;
  statusCode: number | null;
  error: string | null;
  createdAt: number;
  lastAttemptAt: number | null;
  nextAttemptAt: number | null;
  /** What the last attempt sent; null before the first. */
  request: { headers: Record<string, string>; body: string } | null;
  /** What the receiver answered the last attempt; null when it answered nothing. */
  response: { statusCode: number; headers: Record<string, string>; body: string } | null;
  durationMs: number | null;
  redeliveryOf: string | null;
}

/** The webhook kind a timeline entry is, if it is one a hook may choose. */
export function webhookKindOf(row: TimelineRow): WebhookKind | undefined {
  const kind = kindOf(row);
  switch (kind) {
    case 'message.refused':
    case 'event.error':
      return kind;
    // What fails in an agent's outage is told once, by its start and its end.
    case 'message.expired':
      return row.detail === EXPIRED_UNFORWARDED_DETAIL ? undefined : kind;
    case 'message.forward_failed':
      return isOutageFailure(row) ? undefined : kind;
    case 'forwards.failing':
      return 'message.forward_failed';
    case 'forwards.back':
      return kind;
    case 'status.changed': {
      const { from, to } = JSON.parse(row.data ?? '{}') as { from?: string; to?: string };
      if (to === 'failing') return 'agent.failing';
      if (to === 'unreachable') return 'agent.unreachable';
      const running = (status: string | undefined) => status === 'active' || status === 'idle';
      const gone = (status: string | undefined) =>
        (GONE_STATUSES as readonly (string | undefined)[]).includes(status);
      if (running(from) && to === 'offline') return 'agent.silent';
      if (running(to) && gone(from)) return 'agent.back';
      return undefined;
    }
    case 'event.info': {
      // A hosted agent's failure ended (services/hosting/failures.ts).
      const { hosted } = JSON.parse(row.data ?? '{}') as { hosted?: { recovered?: boolean } };
      return hosted?.recovered === true ? 'agent.recovered' : undefined;
    }
    case 'health.changed': {
      const { healthy } = JSON.parse(row.data ?? '{}') as { healthy?: boolean };
      return healthy === false ? 'agent.unhealthy' : undefined;
    }
    default:
      return undefined;
  }
}

/** `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`: the `agentry-signature` header. */
export function webhookSignature(secret: string, seconds: number, body: string): string {
  const mac = createHmac('sha256', secret).update(`${seconds}.${body}`).digest('hex');
  return `t=${seconds},v1=${mac}`;
}

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/**
 * Webhooks (docs/webhooks.md): each user's hooks, and their deliveries. It hears on the
 * change feed of every timeline entry recorded in this process (the process that recorded an
 * entry tells of it, once); an entry of a kind a hook of the agent's owner chose becomes a
 * delivery, a row in the queue. A loop
 * claims due deliveries (one process at a time each), POSTs them signed through the outbound
 * guard the proxy uses, and schedules a retry after a failure until the last is spent.
 */
export class WebhooksService implements ChangeConsumer<'timeline.recorded'> {
  readonly kinds = ['timeline.recorded'] as const;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  private sendAgain = false;
  /** Enqueues and attempts under way, which closing waits for. */
  private readonly work = new Set<Promise<unknown>>();
  private readonly stopping = new AbortController();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly dispatcher: Dispatcher,
    private readonly policy: WebhookPolicy,
    private readonly logger: Logger,
    /** Counts each attempt's outcome (the metrics). */
    private readonly count: (outcome: DeliveryOutcome) => void,
  ) {}

  // ---- Hooks -----------------------------------------------------------------------------

  /** Makes a hook for the user; its secret is shown this once. */
  async create(userId: string, fields: WebhookFields): Promise<WebhookInfo & { secret: string }> {
    await this.deliverable(fields.url);
    const agents = await this.ownAgents(userId, fields.agents);
    const now = this.clock.now();
    const id = `wh_${Array.from(randomBytes(16), (b) => BASE32[b & 31]).join('')}`;
    const secret = `whsec_${randomBytes(32).toString('base64url')}`;
    const kinds = [...new Set(fields.kinds)];
    await this.store.transaction(async (tx) => {
      // Two hooks made at once must not both pass the limit: the user's row is locked.
      await tx.users.lock(userId);
      if ((await tx.webhooks.countForUser(userId)) >= MAX_WEBHOOKS_PER_USER) {
        throw new ConflictError(
          `A user may have at most ${MAX_WEBHOOKS_PER_USER} webhooks; delete one first`,
        );
      }
      await tx.webhooks.insert({
        id,
        user_id: userId,
        url: fields.url,
        kinds: JSON.stringify(kinds),
        agents: agents === null ? null : JSON.stringify(agents),
        description: fields.description ?? null,
        secret,
        created_at: now,
        updated_at: now,
      });
    });
    this.logger.info({ webhook: id, kinds }, 'webhook created');
    return {
      id,
      url: fields.url,
      kinds,
      agents,
      description: fields.description ?? null,
      createdAt: now,
      updatedAt: now,
      secret,
    };
  }

  /** The user's hooks, oldest first. */
  async list(userId: string): Promise<WebhookInfo[]> {
    return (await this.store.repos.webhooks.listForUser(userId)).map(infoOf);
  }

  /** Whose a hook is, for the operator's commands, which name hooks by id; 404 for none. */
  async ownerOf(id: string): Promise<string> {
    const hook = await this.store.repos.webhooks.findById(id);
    if (!hook) throw new NotFoundError(WEBHOOK_NOT_FOUND);
    return hook.user_id;
  }

  /** One of the user's hooks; 404 for any other. */
  async get(userId: string, id: string): Promise<WebhookInfo> {
    return infoOf(await this.owned(userId, id));
  }

  /** Changes the fields given of one of the user's hooks. */
  async update(userId: string, id: string, fields: Partial<WebhookFields>): Promise<WebhookInfo> {
    await this.owned(userId, id);
    if (fields.url !== undefined) await this.deliverable(fields.url);
    const agents =
      fields.agents === undefined ? undefined : await this.ownAgents(userId, fields.agents);
    const changed = await this.store.repos.webhooks.update(id, userId, {
      ...(fields.url !== undefined ? { url: fields.url } : {}),
      ...(fields.kinds !== undefined ? { kinds: JSON.stringify([...new Set(fields.kinds)]) } : {}),
      ...(agents !== undefined ? { agents: agents === null ? null : JSON.stringify(agents) } : {}),
      ...(fields.description !== undefined ? { description: fields.description } : {}),
      updated_at: this.clock.now(),
    });
    if (!changed) throw new NotFoundError(WEBHOOK_NOT_FOUND);
    return infoOf(changed);
  }

  /** Deletes one of the user's hooks and its deliveries. */
  async remove(userId: string, id: string): Promise<void> {
    if (!(await this.store.repos.webhooks.remove(id, userId))) {
      throw new NotFoundError(WEBHOOK_NOT_FOUND);
    }
    this.logger.info({ webhook: id }, 'webhook deleted');
  }

  /** A page of one of the user's hooks' deliveries, newest first. */
  async deliveries(
    userId: string,
    id: string,
    filter: { status?: WebhookDeliveryStatus; limit: number; offset: number },
  ): Promise<WebhookDeliveryInfo[]> {
    await this.owned(userId, id);
    return (await this.store.repos.webhooks.listDeliveries(id, filter)).map(deliveryInfoOf);
  }

  /**
   * Sends a `webhook.test` delivery of one of the user's hooks now, and answers it as its
   * first attempt left it (retried later like any other when that failed).
   */
  async test(userId: string, id: string): Promise<WebhookDeliveryInfo> {
    const hook = await this.owned(userId, id);
    const deliveryId = randomUUID();
    return this.sendNow(hook, {
      id: deliveryId,
      kind: 'webhook.test',
      at: isoTimestamp(this.clock.now()),
      agent: null,
      entry: { summary: 'a test delivery, sent because the hook’s owner asked for one' },
      webhook_id: hook.id,
    });
  }

  /**
   * Sends one of a hook's deliveries again, as a new delivery of the same event (a new id,
   * `redelivery_of` the one given), now; answered as its first attempt left it.
   */
  async redeliver(userId: string, id: string, deliveryId: string): Promise<WebhookDeliveryInfo> {
    const hook = await this.owned(userId, id);
    const original = await this.store.repos.webhooks.findDelivery(deliveryId, hook.id);
    if (!original) throw new NotFoundError(DELIVERY_NOT_FOUND);
    const waiting = (await this.store.repos.webhooks.pendingCounts([hook.id])).get(hook.id) ?? 0;
    if (waiting >= MAX_PENDING_PER_WEBHOOK) {
      throw new ConflictError(
        `This webhook has ${waiting} deliveries waiting already; redeliver once they are sent`,
      );
    }
    const payload = JSON.parse(original.payload) as WebhookPayload;
    return this.sendNow(hook, { ...payload, id: randomUUID() }, original.address, original.id);
  }

  /** Makes a delivery claimed by this request, makes its first attempt, and answers it. */
  private async sendNow(
    hook: WebhookRow,
    payload: WebhookPayload,
    address: string | null = null,
    redeliveryOf: string | null = null,
  ): Promise<WebhookDeliveryInfo> {
    const now = this.clock.now();
    // Claimed as it is made, so that this request makes its first attempt, and no loop.
    const claimedUntil = now + this.policy.timeoutMs + LEASE_MARGIN_MS;
    const row = newDelivery(payload, address, now);
    await this.store.repos.webhooks.enqueue([
      { ...row, claimed_until: claimedUntil, redelivery_of: redeliveryOf },
    ]);
    await this.track(
      this.attempt({
        id: row.id,
        webhook_id: hook.id,
        kind: payload.kind,
        address,
        payload: row.payload,
        attempts: 0,
        created_at: now,
        claimed_until: claimedUntil,
        redelivery_of: redeliveryOf,
        user_id: hook.user_id,
        url: hook.url,
        secret: hook.secret,
      }),
    );
    // Gone only if the hook was deleted meanwhile (or, for an agent's, the agent changed hands).
    const sent = await this.store.repos.webhooks.findDelivery(row.id);
    if (!sent) throw new NotFoundError(DELIVERY_NOT_FOUND);
    return deliveryInfoOf(sent);
  }

  private async owned(userId: string, id: string): Promise<WebhookRow> {
    const hook = await this.store.repos.webhooks.find(id, userId);
    if (!hook) throw new NotFoundError(WEBHOOK_NOT_FOUND);
    return hook;
  }

  /**
   * Refuses (422) a URL the outbound guard would refuse every delivery to, by the rule it
   * connects by, so that a hook is not made only to fail each time.
   */
  private async deliverable(url: string): Promise<void> {
    if (this.policy.allowPrivateTargets) return;
    const refused = await refusedTarget(url);
    if (refused) {
      throw RequestValidationError.single(
        ['body', 'url'],
        `Deliveries to ${url} would be refused: ${refused.message}; ${PRIVATE_TARGET_HINT}`,
      );
    }
  }

  /** The agents a hook names, each one the user owns (400 otherwise); null: all of them. */
  private async ownAgents(
    userId: string,
    agents: string[] | null | undefined,
  ): Promise<string[] | null> {
    if (agents == null) return null;
    const unique = [...new Set(agents)];
    const owners = await this.store.repos.deliveries.owners(unique);
    const foreign = unique.filter((address) => owners.get(address)?.userId !== userId);
    if (foreign.length > 0) {
      throw new BadRequestError(`Not one of your agents: ${foreign.join(', ')}`);
    }
    return unique;
  }

  // ---- Enqueueing (the change feed) ------------------------------------------------------

  /**
   * Entries recorded: those of this process come with what they say; another process's are
   * that process's to deliver.
   */
  heard(change: ChangeOf<'timeline.recorded'>): void {
    if (change.local) this.recorded(change.local.rows);
  }

  private recorded(rows: readonly TimelineRow[]): void {
    const news = rows.flatMap((row) => {
      const kind = webhookKindOf(row);
      return kind ? [{ kind, row }] : [];
    });
    if (news.length === 0) return;
    void this.track(
      this.enqueue(news).catch((err: unknown) =>
        this.logger.warn({ err }, 'webhook deliveries not enqueued'),
      ),
    );
  }

  /**
   * Makes a delivery of each entry for each hook of the agent's current owner that chose its
   * kind (and names the agent, or names none), then sends them.
   */
  private async enqueue(news: { kind: WebhookKind; row: TimelineRow }[]): Promise<void> {
    const { deliveries, webhooks } = this.store.repos;
    const owners = await deliveries.owners([...new Set(news.map(({ row }) => row.address))]);
    const hooksOf = new Map<string, ParsedHook[]>();
    for (const owner of new Set([...owners.values()].map((o) => o.userId))) {
      hooksOf.set(owner, (await webhooks.listForUser(owner)).map(parsed));
    }
    const now = this.clock.now();
    const wanted: { hook: ParsedHook; payload: WebhookPayload; address: string }[] = [];
    for (const { kind, row } of news) {
      const owner = owners.get(row.address);
      // Only an owner who held the agent when it happened is told.
      if (!owner || row.at < owner.since) continue;
      for (const hook of hooksOf.get(owner.userId) ?? []) {
        if (!hook.kinds.includes(kind)) continue;
        if (hook.agents !== null && !hook.agents.includes(row.address)) continue;
        const payload: WebhookPayload = {
          id: randomUUID(),
          kind,
          at: isoTimestamp(row.at),
          agent: row.address,
          // The entry as the timeline shows it.
          entry: timelineEntry(row),
          webhook_id: hook.id,
        };
        wanted.push({ hook, payload, address: row.address });
      }
    }
    if (wanted.length === 0) return;
    const pending = await webhooks.pendingCounts([...new Set(wanted.map((w) => w.hook.id))]);
    const rows: NewWebhookDelivery[] = [];
    for (const { hook, payload, address } of wanted) {
      const waiting = pending.get(hook.id) ?? 0;
      if (waiting >= MAX_PENDING_PER_WEBHOOK) {
        this.count('dropped');
        this.logger.warn(
          { webhook: hook.id, kind: payload.kind, agent: address, pending: waiting },
          'webhook delivery dropped: too many pending',
        );
        continue;
      }
      pending.set(hook.id, waiting + 1);
      rows.push(newDelivery(payload, address, now));
    }
    await webhooks.enqueue(rows);
    this.wake();
  }

  // ---- Sending ---------------------------------------------------------------------------

  /** Starts the loop that sends what is due. */
  start(): void {
    this.timer ??= setInterval(() => this.wake(), LOOP_MS);
    this.timer.unref();
    this.wake();
  }

  /**
   * Stops sending: attempts under way are abandoned and their deliveries given back, to be
   * sent again (by another process, or this one when it starts again).
   */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.stopping.abort();
    while (this.work.size > 0 || this.sending) {
      await Promise.allSettled([...this.work, this.sending]);
    }
  }

  /** Sends what is due soon (at once, unless a round is under way: then after it). */
  private wake(): void {
    if (this.timer === undefined || this.stopping.signal.aborted) return;
    if (this.sending) {
      this.sendAgain = true;
      return;
    }
    this.sending = this.deliverDue()
      .catch((err: unknown) => this.logger.warn({ err }, 'webhook deliveries not sent'))
      .then(() => {
        this.sending = undefined;
        if (this.sendAgain) {
          this.sendAgain = false;
          this.wake();
        }
      });
  }

  /** Claims and attempts every delivery due now, a batch at a time; how many were attempted. */
  async deliverDue(): Promise<number> {
    let attempted = 0;
    while (!this.stopping.signal.aborted) {
      const now = this.clock.now();
      const claims = await this.store.repos.webhooks.claimDue(
        now,
        now + this.policy.timeoutMs + LEASE_MARGIN_MS,
        CLAIM_BATCH,
      );
      await Promise.all(claims.map((claim) => this.track(this.attempt(claim))));
      attempted += claims.length;
      if (claims.length < CLAIM_BATCH) break;
    }
    return attempted;
  }

  private track<T>(promise: Promise<T>): Promise<T> {
    this.work.add(promise);
    void promise.finally(() => this.work.delete(promise)).catch(() => {});
    return promise;
  }

  /** One attempt of a claimed delivery, and what it leaves: delivered, a retry, or given up. */
  private async attempt(claim: ClaimedDelivery): Promise<void> {
    const { webhooks, deliveries } = this.store.repos;
    if (claim.address !== null) {
      // The agent changed hands since (its deletion took the rest): not the hook's to hear.
      const owner = (await deliveries.owners([claim.address])).get(claim.address);
      if (owner?.userId !== claim.user_id || owner.since > claim.created_at) {
        await webhooks.drop(claim.id);
        return;
      }
    }
    const seconds = Math.floor(this.clock.now() / 1000);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': this.policy.userAgent,
      'agentry-webhook-id': claim.webhook_id,
      'agentry-delivery-id': claim.id,
      ...(claim.redelivery_of !== null ? { 'agentry-redelivery-of': claim.redelivery_of } : {}),
      'agentry-signature': webhookSignature(claim.secret, seconds, claim.payload),
    };
    const started = performance.now();
    let statusCode: number | null = null;
    let answer: { headers: string; body: string } | null = null;
    let failure: { error: string; final: boolean } | null = null;
    try {
      const response = await request(claim.url, {
        method: 'POST',
        headers,
        body: claim.payload,
        dispatcher: this.dispatcher,
        signal: AbortSignal.any([AbortSignal.timeout(this.policy.timeoutMs), this.stopping.signal]),
      });
      statusCode = response.statusCode;
      answer = {
        headers: JSON.stringify(keptHeaders(response.headers)),
        body: await excerptOf(response.body),
      };
      if (statusCode < 200 || statusCode >= 300) {
        failure = { error: `answered with status ${statusCode}`, final: false };
      }
    } catch (err) {
      if (this.stopping.signal.aborted) {
        await webhooks.release([{ id: claim.id, claimedUntil: claim.claimed_until }]);
        return;
      }
      failure = this.failureOf(err);
    }
    const exchange: AttemptExchange = {
      request_headers: JSON.stringify(headers),
      response_headers: answer?.headers ?? null,
      response_body: answer?.body ?? null,
      duration_ms: Math.round(performance.now() - started),
    };
    const attempts = claim.attempts + 1;
    const now = this.clock.now();
    const delay = this.policy.retryDelaysMs[attempts - 1];
    const outcome: AttemptOutcome =
      failure === null
        ? {
            status: 'delivered',
            status_code: statusCode,
            error: null,
            at: now,
            next_attempt_at: null,
            exchange,
          }
        : failure.final || delay === undefined
          ? {
              status: 'failed',
              status_code: statusCode,
              error: failure.error,
              at: now,
              next_attempt_at: null,
              exchange,
            }
          : {
              status: 'pending',
              status_code: statusCode,
              error: failure.error,
              at: now,
              next_attempt_at: now + delay,
              exchange,
            };
    await webhooks.settle(claim.id, claim.claimed_until, outcome);
    const counted: DeliveryOutcome =
      outcome.status === 'delivered'
        ? 'delivered'
        : outcome.status === 'failed'
          ? 'failed'
          : 'retry';
    this.count(counted);
    this.logger.info(
      {
        webhook: claim.webhook_id,
        delivery: claim.id,
        kind: claim.kind,
        agent: claim.address,
        attempt: attempts,
        statusCode,
        outcome: counted,
        ...(outcome.error !== null ? { error: outcome.error } : {}),
        ...(outcome.next_attempt_at !== null ? { retryInMs: delay } : {}),
      },
      'webhook delivery',
    );
  }

  /** Why an attempt failed, and whether trying again could help. */
  private failureOf(err: unknown): { error: string; final: boolean } {
    const causes: unknown[] = [];
    for (let e: unknown = err; e instanceof Error && causes.length < 5; e = e.cause) causes.push(e);
    const refused = causes.find((e) => e instanceof PrivateTargetError);
    if (refused instanceof PrivateTargetError) {
      // The guard answers the same every time: retrying changes nothing.
      return {
        error: `private address refused: ${refused.host} resolves to ${refused.address}; ${PRIVATE_TARGET_HINT}`,
        final: true,
      };
    }
    if (causes.some((e) => e instanceof Error && e.name === 'TimeoutError')) {
      return { error: `no answer within ${this.policy.timeoutMs} ms`, final: false };
    }
    const code = causes
      .map((e) => (e as { code?: unknown }).code)
      .find((c) => typeof c === 'string');
    const message = err instanceof Error ? err.message : String(err);
    return {
      error: `unreachable${code ? ` (${code})` : ''}: ${message}`.slice(0, ERROR_MAX_LENGTH),
      final: false,
    };
  }

  /** Deletes delivered and failed deliveries older than the retention period; how many went. */
  prune(batchSize = 500, maxBatches = 100): Promise<number> {
    const before = this.clock.now() - this.policy.retentionMs;
    return inBatches(batchSize, maxBatches, () =>
      this.store.repos.webhooks.prune(before, batchSize),
    );
  }
}

const WEBHOOK_NOT_FOUND = 'Webhook not found';
const DELIVERY_NOT_FOUND = 'Delivery not found';
/** Bytes kept of a receiver's answer, and headers of it (each value cut to a length). */
const RESPONSE_BODY_MAX_BYTES = 4096;
const RESPONSE_HEADERS_MAX = 50;
const RESPONSE_HEADER_MAX_LENGTH = 1000;

/** A receiver's headers as kept: a bounded number, each a string of bounded length. */
function keptHeaders(
  headers: Record<string, string | string[] | undefined>,
): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers).slice(0, RESPONSE_HEADERS_MAX)) {
    if (value === undefined) continue;
    kept[name] = (Array.isArray(value) ? value.join(', ') : value).slice(
      0,
      RESPONSE_HEADER_MAX_LENGTH,
    );
  }
  return kept;
}

/**
 * The start of a receiver's answer as text (the rest is not read); NUL, which PostgreSQL's text
 * cannot hold, shown as U+FFFD like any byte that is not UTF-8.
 */
async function excerptOf(body: AsyncIterable<Buffer>): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= RESPONSE_BODY_MAX_BYTES) break;
  }
  return Buffer.concat(chunks)
    .subarray(0, RESPONSE_BODY_MAX_BYTES)
    .toString('utf8')
    .replaceAll('\u0000', '\uFFFD');
}

interface ParsedHook {
  id: string;
  kinds: WebhookKind[];
  agents: string[] | null;
}

function parsed(row: WebhookRow): ParsedHook {
  return {
    id: row.id,
    kinds: JSON.parse(row.kinds) as WebhookKind[],
    agents: row.agents === null ? null : (JSON.parse(row.agents) as string[]),
  };
}

function infoOf(row: WebhookRow): WebhookInfo {
  const { kinds, agents } = parsed(row);
  return {
    id: row.id,
    url: row.url,
    kinds,
    agents,
    description: row.description,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

function deliveryInfoOf(row: WebhookDeliveryRow): WebhookDeliveryInfo {
  const at = (ms: number | null) => (ms === null ? null : Number(ms));
  const headersOf = (json: string) => JSON.parse(json) as Record<string, string>;
  return {
    id: row.id,
    kind: row.kind as WebhookDeliveryKind,
    agent: row.address,
    status: row.status as WebhookDeliveryStatus,
    attempts: Number(row.attempts),
    statusCode: row.status_code,
    error: row.error,
    createdAt: Number(row.created_at),
    lastAttemptAt: at(row.last_attempt_at),
    nextAttemptAt: at(row.next_attempt_at),
    request:
      row.request_headers === null
        ? null
        : { headers: headersOf(row.request_headers), body: row.payload },
    response:
      row.response_headers === null || row.status_code === null
        ? null
        : {
            statusCode: row.status_code,
            headers: headersOf(row.response_headers),
            body: row.response_body ?? '',
          },
    durationMs: at(row.duration_ms),
    redeliveryOf: row.redelivery_of,
  };
}

function newDelivery(
  payload: WebhookPayload,
  address: string | null,
  now: number,
): NewWebhookDelivery {
  return {
    id: payload.id,
    webhook_id: payload.webhook_id,
    kind: payload.kind,
    address,
    payload: JSON.stringify(payload),
    status: 'pending',
    attempts: 0,
    created_at: now,
    next_attempt_at: now,
  };
}
