import { sql, type Kysely, type Selectable } from 'kysely';
import type { AgentProbesTable, Database } from '../schema.js';
import { slices } from '../statements.js';

export type ProbeRow = Selectable<AgentProbesTable>;

/** What became of a probe, as it is settled. */
export interface ProbeOutcome {
  answered: boolean;
  /** When it was settled (answered: when the answer arrived). */
  at: number;
  latencyMs: number | null;
  /** Why it went unanswered, in words. */
  failure: string | null;
}

/** Agents whose owner asked for health probes, and what the probes found. */
export class ProbesRepository {
  constructor(private readonly db: Kysely<Database>) {}

  find(address: string): Promise<ProbeRow | undefined> {
    return this.db
      .selectFrom('agent_probes')
      .selectAll()
      .where('address', '=', address)
      .executeTakeFirst();
  }

  /**
   * Turns probes on for the agent every `intervalSeconds`, the first due at once; for an agent
   * probed already, changes the interval (the next probe no later than one new interval away).
   */
  async enable(address: string, intervalSeconds: number, now: number): Promise<void> {
    await this.db
      .insertInto('agent_probes')
      .values({
        address,
        interval_seconds: intervalSeconds,
        next_probe_at: now,
        session_id: null,
        probe_msg_id: null,
        probe_sent_at: null,
        healthy: null,
        last_probe_at: null,
        last_answered_at: null,
        last_latency_ms: null,
        last_failure: null,
        created_at: now,
      })
      .onConflict((oc) =>
        oc.column('address').doUpdateSet({
          interval_seconds: intervalSeconds,
          next_probe_at: sql`case when agent_probes.next_probe_at < ${now + intervalSeconds * 1000} then agent_probes.next_probe_at else ${now + intervalSeconds * 1000} end`,
        }),
      )
      .execute();
  }

  /**
   * Turns probes off; answers whether they were on, and the chat session they were sent in (null
   * before any). That session is retired at `now`: its entries are still pruned (see
   * {@link pruneRetiredSessions}), as a live probe session's are.
   */
  async disable(address: string, now: number): Promise<{ on: boolean; sessionId: string | null }> {
    const gone = await this.db
      .deleteFrom('agent_probes')
      .where('address', '=', address)
      .returning('session_id')
      .executeTakeFirst();
    await this.db.deleteFrom('agent_probe_results').where('address', '=', address).execute();
    const sessionId = gone?.session_id ?? null;
    if (sessionId !== null) {
      await this.db
        .insertInto('retired_probe_sessions')
        .values({ session_id: sessionId, address, retired_at: now })
        .onConflict((oc) => oc.column('session_id').doNothing())
        .execute();
    }
    return { on: gone !== undefined, sessionId };
  }

  /** Agents with a probe due, or a probe waiting for its answer: up to `limit`. */
  due(now: number, limit: number): Promise<ProbeRow[]> {
    return this.db
      .selectFrom('agent_probes')
      .selectAll()
      .where((eb) => eb.or([eb('next_probe_at', '<=', now), eb('probe_msg_id', 'is not', null)]))
      .orderBy('next_probe_at')
      .limit(limit)
      .execute();
  }

  /**
   * Takes the agent's next probe, `msgId`, sent now: only one process's update takes it (the
   * probe must be due and none waiting), so that one process probes an agent at a time.
   */
  async claimProbe(address: string, msgId: string, now: number, nextAt: number): Promise<boolean> {
    const result = await this.db
      .updateTable('agent_probes')
      .set({
        probe_msg_id: msgId,
        probe_sent_at: now,
        last_probe_at: now,
        next_probe_at: nextAt,
      })
      .where('address', '=', address)
      .where('probe_msg_id', 'is', null)
      .where('next_probe_at', '<=', now)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  /** Gives back the probe `msgId`, which could not be sent: it counts for nothing. */
  async release(address: string, msgId: string): Promise<void> {
    await this.db
      .updateTable('agent_probes')
      .set({ probe_msg_id: null, probe_sent_at: null })
      .where('address', '=', address)
      .where('probe_msg_id', '=', msgId)
      .execute();
  }

  /** The chat session the agent's probes are sent in. */
  async setSession(address: string, sessionId: string): Promise<void> {
    await this.db
      .updateTable('agent_probes')
      .set({ session_id: sessionId })
      .where('address', '=', address)
      .execute();
  }

  /**
   * Settles the probe `msgId` and keeps its outcome; `unhealthyAfter` probes unanswered in a
   * row make the agent unhealthy, one answered makes it healthy. Answers whether the agent was
   * healthy before and after, or undefined when the probe was settled already (by another
   * process) or probes were turned off.
   */
  async settle(
    address: string,
    msgId: string,
    outcome: ProbeOutcome,
    unhealthyAfter: number,
  ): Promise<{ before: number | null; after: number | null } | undefined> {
    const row = await this.find(address);
    if (!row || row.probe_msg_id !== msgId) return undefined;
    const failures = outcome.answered ? 0 : row.failures + 1;
    const healthy = outcome.answered ? 1 : failures >= unhealthyAfter ? 0 : row.healthy;
    const result = await this.db
      .updateTable('agent_probes')
      .set({
        probe_msg_id: null,
        probe_sent_at: null,
        failures,
        healthy,
        ...(outcome.answered
          ? { last_answered_at: outcome.at, last_latency_ms: outcome.latencyMs }
          : { last_failure: outcome.failure }),
      })
      .where('address', '=', address)
      .where('probe_msg_id', '=', msgId)
      .executeTakeFirst();
    if (result.numUpdatedRows === 0n) return undefined;
    await this.db
      .insertInto('agent_probe_results')
      .values({
        address,
        sent_at: row.probe_sent_at ?? outcome.at,
        answered: outcome.answered ? 1 : 0,
        latency_ms: outcome.latencyMs,
      })
      .execute();
    return { before: row.healthy, after: healthy };
  }

  /** The share of each agent's probes sent since `since` that were answered (none: absent). */
  async successRates(addresses: string[], since: number): Promise<Map<string, number>> {
    const rates = new Map<string, number>();
    for (const slice of slices(addresses)) {
      const rows = await this.db
        .selectFrom('agent_probe_results')
        .select([
          'address',
          sql<number>`count(*)`.as('probes'),
          sql<number>`sum(answered)`.as('answered'),
        ])
        .where('address', 'in', slice)
        .where('sent_at', '>=', since)
        .groupBy('address')
        .execute();
      for (const row of rows) rates.set(row.address, Number(row.answered) / Number(row.probes));
    }
    return rates;
  }

  /**
   * Deletes up to `limit` chat entries older than `before` from the sessions of agents' probes:
   * those probes are sent in now, and those of probes their owner turned off (a probe every 5
   * seconds would otherwise add 35,000 entries a day); how many went.
   */
  async pruneSessionEntries(before: number, limit: number): Promise<number> {
    const result = await this.db
      .deleteFrom('chat_entries')
      .where(
        'id',
        'in',
        this.db
          .selectFrom('chat_entries as e')
          .select('e.id')
          .where('e.at', '<', before)
          .where('e.session_id', 'in', (eb) =>
            eb
              .selectFrom('agent_probes')
              .select('session_id')
              .where('session_id', 'is not', null)
              .union(eb.selectFrom('retired_probe_sessions').select('session_id')),
          )
          .limit(limit),
      )
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /**
   * Forgets up to `limit` retired probe sessions retired before `before` that have no entry
   * left (pruned to nothing); how many went.
   */
  async forgetRetiredSessions(before: number, limit: number): Promise<number> {
    const result = await this.db
      .deleteFrom('retired_probe_sessions')
      .where(
        'session_id',
        'in',
        this.db
          .selectFrom('retired_probe_sessions as r')
          .select('r.session_id')
          .where('r.retired_at', '<', before)
          .where((eb) =>
            eb.not(
              eb.exists(
                eb
                  .selectFrom('chat_entries as e')
                  .select('e.id')
                  .whereRef('e.session_id', '=', 'r.session_id'),
              ),
            ),
          )
          .limit(limit),
      )
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** Deletes up to `limit` probe outcomes older than `before`; how many went. */
  async prune(before: number, limit: number): Promise<number> {
    const result = await this.db
      .deleteFrom('agent_probe_results')
      .where(
        'id',
        'in',
        this.db
          .selectFrom('agent_probe_results')
          .select('id')
          .where('sent_at', '<', before)
          .limit(limit),
      )
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
