import { randomUUID } from 'node:crypto';
import type { Principal } from '../auth/principal.js';
import { BadRequestError, NotFoundError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/index.js';
import type { ProbeRow } from '../store/repositories/probes.js';
import type { ActivityService } from './activity/index.js';
import type { ChatService } from './chat.js';
import {
  HEALTH_RATE_WINDOW_MS,
  MAX_PROBE_INTERVAL_SECONDS,
  MIN_PROBE_INTERVAL_SECONDS,
} from '../wire/probes.js';

export interface ProbesPolicy {
  /** How long a probe waits for its answer at most (less when the interval is shorter). */
  answerTimeoutMs: number;
  /** Probes unanswered in a row that make an agent unhealthy. */
  unhealthyAfter: number;
  /** Probes looked at per run, at most. */
  batch: number;
  /** How long probe outcomes are kept. */
  retentionMs: number;
  /** How long the entries of the chat session kept for an agent's probes are kept. */
  sessionWindowMs: number;
}

/** An agent's health as its owner sees it. */
export interface ProbesInfo {
  address: string;
  row: ProbeRow | undefined;
  successRate: number | null;
}

/**
 * Active health (docs/activity.md, "Health"): for each agent whose owner asked for it, a probe
 * on the owner's schedule, a chat message from the owner's chat identity which the agent
 * answers by acknowledging it, as the chat protocol asks. What each probe found (answered and
 * how fast, or not) is kept; probes unanswered in a row make the agent unhealthy (on its
 * timeline, and a webhook), the next one answered healthy again. Any process may run the
 * probes: each is taken by one process's update, so an agent is probed by one at a time.
 */
export class ProbesService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly chat: ChatService,
    private readonly activity: ActivityService,
    private readonly policy: ProbesPolicy,
    private readonly logger: Logger,
  ) {}

  /** The agent's health; 404 unless it is the caller's. */
  async get(principal: Principal, address: string): Promise<ProbesInfo> {
    await this.ownerOf(principal, address);
    return this.info(address);
  }

  /** Turns probes on for the caller's agent, every `intervalSeconds` (or changes the interval). */
  async enable(
    principal: Principal,
    address: string,
    intervalSeconds: number,
  ): Promise<ProbesInfo> {
    await this.ownerOf(principal, address);
    await this.store.repos.probes.enable(address, intervalSeconds, this.clock.now());
    return this.info(address);
  }

  /** Turns probes off for the caller's agent, and forgets what they found. */
  async disable(principal: Principal, address: string): Promise<void> {
    await this.ownerOf(principal, address);
    await this.turnOff(address);
  }

  /**
   * Turns the agent's probes off: what they found goes, and the chat session they were sent in
   * ends (nothing more is sent in it) and is kept pruned as it was until it is empty.
   */
  private async turnOff(address: string): Promise<void> {
    const now = this.clock.now();
    const { sessionId } = await this.store.repos.probes.disable(address, now);
    if (sessionId !== null) await this.store.repos.chat.endSession(sessionId, now);
  }

  /** The agent's health, for the operator (any user's agent); 404 for none registered. */
  async getAsOperator(address: string): Promise<ProbesInfo> {
    await this.registered(address);
    return this.info(address);
  }

  /** Turns probes on (or changes their interval) for any user's agent, as the operator. */
  async enableAsOperator(address: string, intervalSeconds: number): Promise<ProbesInfo> {
    await this.registered(address);
    checkInterval(intervalSeconds);
    await this.store.repos.probes.enable(address, intervalSeconds, this.clock.now());
    return this.info(address);
  }

  /** Turns probes off for any user's agent, as the operator, and forgets what they found. */
  async disableAsOperator(address: string): Promise<void> {
    await this.registered(address);
    await this.turnOff(address);
  }

  /**
   * Sends the probes that are due and settles those waiting (answered, or out of time); answers
   * whether more may be waiting.
   */
  async probeDue(): Promise<boolean> {
    const now = this.clock.now();
    const rows = await this.store.repos.probes.due(now, this.policy.batch);
    await Promise.all(
      rows.map((row) =>
        (row.probe_msg_id === null ? this.send(row, now) : this.look(row, now)).catch(
          (err: unknown) => this.logger.warn({ err, agent: row.address }, 'health probe failed'),
        ),
      ),
    );
    return rows.length === this.policy.batch;
  }

  /**
   * Deletes probe outcomes older than their retention, and the entries of probe sessions older
   * than their window, in batches, those of sessions whose probes were turned off as well (and,
   * once such a session is empty, that it was one); how many went.
   */
  async prune(batchSize = 5000, maxBatches = 100): Promise<number> {
    const { probes } = this.store.repos;
    const now = this.clock.now();
    let removed = 0;
    for (const [run, before] of [
      [(b: number) => probes.prune(b, batchSize), now - this.policy.retentionMs],
      [(b: number) => probes.pruneSessionEntries(b, batchSize), now - this.policy.sessionWindowMs],
      [
        (b: number) => probes.forgetRetiredSessions(b, batchSize),
        now - this.policy.sessionWindowMs,
      ],
    ] as const) {
      for (let batch = 0; batch < maxBatches; batch++) {
        const gone = await run(before);
        removed += gone;
        if (gone < batchSize) break;
      }
    }
    return removed;
  }

  private async send(row: ProbeRow, now: number): Promise<void> {
    const { probes, agents } = this.store.repos;
    const msgId = randomUUID();
    if (!(await probes.claimProbe(row.address, msgId, now, now + row.interval_seconds * 1000))) {
      return;
    }
    const agent = await agents.find(row.address);
    if (!agent) return;
    let failure: string | null;
    try {
      const sent = await this.chat.probe(agent.user_id, row.address, row.session_id, msgId);
      if (sent.sessionId !== row.session_id) await probes.setSession(row.address, sent.sessionId);
      failure = sent.failure;
    } catch (err) {
      // Not sent (the owner's message quota is spent, their chat identity cannot be made): it
      // says nothing of the agent, and counts for nothing.
      await probes.release(row.address, msgId);
      this.logger.warn({ err, agent: row.address }, 'health probe not sent');
      return;
    }
    if (failure !== null) {
      await this.settle(row.address, msgId, now, { answered: false, failure });
    }
  }

  /** Looks for the answer of the probe waiting; out of time, it is unanswered. */
  private async look(row: ProbeRow, now: number): Promise<void> {
    const sentAt = row.probe_sent_at ?? now;
    const answeredAt =
      row.session_id === null
        ? undefined
        : await this.store.repos.chat.acknowledgedAt(row.session_id, row.probe_msg_id!);
    if (answeredAt !== undefined) {
      await this.settle(row.address, row.probe_msg_id!, sentAt, {
        answered: true,
        at: answeredAt,
      });
      return;
    }
    const timeout = Math.min(this.policy.answerTimeoutMs, row.interval_seconds * 1000);
    if (now - sentAt >= timeout) {
      await this.settle(row.address, row.probe_msg_id!, sentAt, {
        answered: false,
        failure: `no acknowledgement within ${Math.round(timeout / 1000)} s`,
      });
    }
  }

  private async settle(
    address: string,
    msgId: string,
    sentAt: number,
    outcome: { answered: true; at: number } | { answered: false; failure: string },
  ): Promise<void> {
    const now = this.clock.now();
    const latencyMs = outcome.answered ? Math.max(0, outcome.at - sentAt) : null;
    const settled = await this.store.repos.probes.settle(
      address,
      msgId,
      {
        answered: outcome.answered,
        at: outcome.answered ? outcome.at : now,
        latencyMs,
        failure: outcome.answered ? null : outcome.failure,
      },
      this.policy.unhealthyAfter,
    );
    // An answer is the agent seen running, as a call with its attestation is (it does not undo
    // a stop it told the Almanac of).
    if (settled && outcome.answered) this.activity.seen(address, 'call', outcome.at);
    if (!settled || settled.before === settled.after) return;
    // Known healthy from the first answer on is no change worth telling.
    if (settled.before === null && settled.after === 1) return;
    const healthy = settled.after === 1;
    const message = healthy
      ? `answers health probes again (${latencyMs} ms)`
      : `stopped answering health probes: ${outcome.answered ? '' : outcome.failure}`;
    await this.activity.record([
      {
        address,
        kind: 'health.changed',
        at: now,
        message,
        data: JSON.stringify({
          healthy,
          latency_ms: latencyMs,
          failure: outcome.answered ? null : outcome.failure,
        }),
      },
    ]);
    if (healthy)
      this.logger.info({ agent: address, latencyMs }, 'agent answers health probes again');
    else
      this.logger.warn(
        { agent: address, reason: message },
        'agent stopped answering health probes',
      );
  }

  private async info(address: string): Promise<ProbesInfo> {
    const { probes } = this.store.repos;
    const row = await probes.find(address);
    const rates = await probes.successRates([address], this.clock.now() - HEALTH_RATE_WINDOW_MS);
    return { address, row, successRate: rates.get(address) ?? null };
  }

  /** 404 unless the agent is registered here. */
  private async registered(address: string): Promise<void> {
    if (!(await this.store.repos.agents.find(address))) {
      throw new NotFoundError(`Agent ${address} is not registered here`);
    }
  }

  /** The owner of the caller's agent; 404 for another's, as for none. */
  private async ownerOf(principal: Principal, address: string): Promise<string> {
    const agent = await this.store.repos.agents.find(address);
    if (principal.kind !== 'user' || agent?.user_id !== principal.userId) {
      throw new NotFoundError('Agent not found');
    }
    return agent.user_id;
  }
}

/** 400 unless the interval is within the bounds the API's schema holds it to. */
function checkInterval(seconds: number): void {
  if (
    !Number.isInteger(seconds) ||
    seconds < MIN_PROBE_INTERVAL_SECONDS ||
    seconds > MAX_PROBE_INTERVAL_SECONDS
  ) {
    throw new BadRequestError(
      `The interval must be a whole number of seconds from ${MIN_PROBE_INTERVAL_SECONDS} to ${MAX_PROBE_INTERVAL_SECONDS}`,
    );
  }
}
