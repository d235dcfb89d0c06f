import { sql, type Kysely, type Selectable } from 'kysely';
import type { DialectName } from '../dialect.js';
import type { Database, ForwardOutagesTable } from '../schema.js';
import type { ClaimedForward } from './mailbox.js';

export type OutageRow = Selectable<ForwardOutagesTable>;

/** What a failed forward adds to its agent's outage. */
export interface OutageFailure {
  at: number;
  error: string | null;
  /** Messages that could not be forwarded because of it (0 for one counted before). */
  messages: number;
}

/** An agent's outage claimed for one attempt, with the kept message that attempt forwards. */
export interface ClaimedProbe {
  address: string;
  /** Attempts of the back-off that failed before this one. */
  failures: number;
  /** The claim's end: the outage's `next_at`, and the message's `next_forward_at`. */
  lease: number;
  message: ClaimedForward | undefined;
}

/**
 * Outages of proxy agents (docs/mailbox.md, "Kept forwards"): one row per agent whose
 * forwards are failing, opened by the first failed forward and ended by the first that goes
 * through; its agent's kept messages are tried by one attempt per back-off step meanwhile.
 */
export class ProxyRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectName,
  ) {}

  /**
   * Opens the agent's outage with this failure, the next attempt due at `nextAt`; the row
   * when this call opened it, undefined when one was open already.
   */
  async open(
    address: string,
    failure: OutageFailure,
    nextAt: number,
  ): Promise<OutageRow | undefined> {
    return this.db
      .insertInto('forward_outages')
      .values({
        address,
        began_at: failure.at,
        last_failed_at: failure.at,
        failures: 1,
        messages: failure.messages,
        error: failure.error,
        next_at: nextAt,
      })
      .onConflict((oc) => oc.column('address').doNothing())
      .returningAll()
      .executeTakeFirst();
  }

  /**
   * Adds a failure to the agent's open outage (without moving its back-off); the row as it
   * now stands, undefined when none is open.
   */
  async extend(address: string, failure: OutageFailure): Promise<OutageRow | undefined> {
    return this.db
      .updateTable('forward_outages')
      .set((eb) => ({
        last_failed_at: sql<number>`case when last_failed_at < ${failure.at} then ${failure.at} else last_failed_at end`,
        messages: eb('messages', '+', failure.messages),
        ...(failure.error !== null ? { error: failure.error } : {}),
      }))
      .where('address', '=', address)
      .returningAll()
      .executeTakeFirst();
  }

  /**
   * After a failed attempt claimed until `lease`: `failures` attempts have now failed, the
   * next is due at `nextAt`. A claim lost meanwhile (the outage ended) changes nothing.
   */
  async failedAttempt(
    address: string,
    lease: number,
    failures: number,
    failure: OutageFailure,
    nextAt: number,
  ): Promise<OutageRow | undefined> {
    return this.db
      .updateTable('forward_outages')
      .set((eb) => ({
        failures,
        next_at: nextAt,
        last_failed_at: sql<number>`case when last_failed_at < ${failure.at} then ${failure.at} else last_failed_at end`,
        messages: eb('messages', '+', failure.messages),
        error: failure.error,
      }))
      .where('address', '=', address)
      .where('next_at', '=', lease)
      .returningAll()
      .executeTakeFirst();
  }

  /** Gives a claimed attempt back undone: due again at `at`. */
  async release(address: string, lease: number, at: number): Promise<void> {
    await this.db
      .updateTable('forward_outages')
      .set({ next_at: at })
      .where('address', '=', address)
      .where('next_at', '=', lease)
      .execute();
  }

  /** Ends the agent's outage; the row when this call ended it. */
  async end(address: string): Promise<OutageRow | undefined> {
    return this.db
      .deleteFrom('forward_outages')
      .where('address', '=', address)
      .returningAll()
      .executeTakeFirst();
  }

  /** Notes the timeline row that stands for the outage that began at `beganAt`. */
  async setEntry(address: string, beganAt: number, entryId: number): Promise<void> {
    await this.db
      .updateTable('forward_outages')
      .set({ entry_id: entryId })
      .where('address', '=', address)
      .where('began_at', '=', beganAt)
      .execute();
  }

  /**
   * Makes the next attempt of these agents' outages due at `at` if it was due later (the
   * agent showed it runs again).
   */
  async dueNow(addresses: readonly string[], at: number): Promise<number> {
    if (addresses.length === 0) return 0;
    const updated = await this.db
      .updateTable('forward_outages')
      .set({ next_at: at })
      .where('address', 'in', addresses)
      .where('next_at', '>', at)
      .executeTakeFirst();
    return Number(updated.numUpdatedRows);
  }

  /**
   * Claims up to `limit` outages whose next attempt is due at `now` and that have a kept
   * message waiting, until `lease` (no other process claims them meanwhile), each with its
   * oldest waiting message, claimed until the same moment. On PostgreSQL an outage another
   * transaction is claiming is skipped rather than waited for.
   */
  async claimProbes(now: number, lease: number, limit: number): Promise<ClaimedProbe[]> {
    const claimed = await this.db
      .updateTable('forward_outages')
      .set({ next_at: lease })
      .where('address', 'in', (eb) =>
        eb
          .selectFrom('forward_outages as o')
          .select('o.address')
          .where('o.next_at', '<=', now)
          .where(({ exists, selectFrom }) =>
            exists(
              selectFrom('messages as m')
                .select(sql`1`.as('one'))
                .whereRef('m.address', '=', 'o.address')
                .where('m.next_forward_at', '<=', now)
                .where('m.expires_at', '>', now),
            ),
          )
          .orderBy('o.next_at')
          .limit(limit)
          .$if(this.dialect === 'postgres', (select) => select.forUpdate().skipLocked()),
      )
      .where('next_at', '<=', now)
      .returning(['address', 'failures'])
      .execute();
    const probes: ClaimedProbe[] = [];
    for (const { address, failures } of claimed) {
      const message = await this.db
        .updateTable('messages')
        .set({ next_forward_at: lease })
        .where('id', '=', (eb) =>
          eb
            .selectFrom('messages')
            .select('id')
            .where('address', '=', address)
            .where('next_forward_at', '<=', now)
            .where('expires_at', '>', now)
            .orderBy('id')
            .limit(1),
        )
        .where('next_forward_at', '<=', now)
        .returning((eb) => [
          'messages.uuid',
          'messages.address',
          'messages.envelope',
          'messages.size',
          'messages.sender',
          'messages.digest',
          'messages.forward_attempts',
          eb
            .selectFrom('agents')
            .select('agents.redirect_url')
            .whereRef('agents.address', '=', 'messages.address')
            .as('url'),
        ])
        .executeTakeFirst();
      probes.push({
        address,
        failures: Number(failures),
        lease,
        message: message && { ...message, url: message.url ?? null, lease },
      });
    }
    return probes;
  }
}
