import { sql, type Kysely, type Selectable } from 'kysely';
import { isUniqueViolation } from '../database.js';
import type { AgentProfile } from '../../wire/agents.js';
import type { Endpoint } from '../../wire/common.js';
import type { AgentsTable, Database } from '../schema.js';

/** An agent's registry entry with its JSON columns read back into values. */
export interface AgentListing {
  address: string;
  user_id: string;
  name: string;
  handle: string | null;
  redirect_url: string | null;
  agent_type: string;
  profile: AgentProfile;
  endpoints: Endpoint[];
  protocols: string[];
  metadata: Record<string, unknown> | null;
  registered_at: number;
  updated_at: number;
  /**
   * Whether the proxy keeps a message it could not forward. Left out of a save, a new listing
   * keeps them and an existing one keeps its owner's choice: the uAgents client registers
   * again at every start and never sends it.
   */
  keep_failed_forwards?: boolean;
}

export interface MailboxCounters {
  pending_messages: number;
  bytes_stored: number;
}

export type StoredAgent = AgentListing & {
  keep_failed_forwards: boolean;
  mailbox: MailboxCounters;
};

/** Where the proxy forwards an agent's messages, and whether it keeps those it cannot. */
export interface Forwarding {
  url: string | null;
  keep: boolean;
  /** Whether its forwards are failing (an outage is open: docs/mailbox.md, "Kept forwards"). */
  failing: boolean;
}

export type ListingChanges = Partial<
  Pick<AgentListing, 'name' | 'handle' | 'redirect_url' | 'profile' | 'keep_failed_forwards'>
> &
  Pick<AgentListing, 'updated_at'>;

/**
 * A write that the unique handle index refused. On PostgreSQL the surrounding transaction
 * cannot continue after it; the caller is expected to abandon it.
 */
export type HandleTaken = 'handle-taken';

type AgentRow = Selectable<AgentsTable> & MailboxCounters;

function toStoredAgent(row: AgentRow): StoredAgent {
  return {
    address: row.address,
    user_id: row.user_id,
    name: row.name,
    handle: row.handle,
    redirect_url: row.redirect_url,
    agent_type: row.agent_type,
    profile: JSON.parse(row.profile) as AgentProfile,
    endpoints: JSON.parse(row.endpoints) as Endpoint[],
    protocols: JSON.parse(row.protocols) as string[],
    metadata: row.metadata === null ? null : (JSON.parse(row.metadata) as Record<string, unknown>),
    registered_at: row.registered_at,
    updated_at: row.updated_at,
    keep_failed_forwards: row.keep_failed_forwards !== 0,
    mailbox: { pending_messages: row.pending_messages, bytes_stored: row.bytes_stored },
  };
}

/** A boolean as the column keeps it (0/1); undefined stays undefined (the column is left alone). */
function flag(value: boolean | undefined): number | undefined {
  return value === undefined ? undefined : Number(value);
}

/** The registry: one row per registered agent, read together with its mailbox counters. */
export class AgentsRepository {
  constructor(private readonly db: Kysely<Database>) {}

  private selectWithMailbox() {
    return this.db
      .selectFrom('agents')
      .leftJoin('mailboxes', 'mailboxes.address', 'agents.address')
      .selectAll('agents')
      .select((eb) => [
        eb.fn.coalesce('mailboxes.pending_messages', sql<number>`0`).as('pending_messages'),
        eb.fn.coalesce('mailboxes.bytes_stored', sql<number>`0`).as('bytes_stored'),
      ]);
  }

  async find(address: string): Promise<StoredAgent | undefined> {
    const row = await this.selectWithMailbox()
      .where('agents.address', '=', address)
      .executeTakeFirst();
    return row && toStoredAgent(row);
  }

  /** A user's agents, oldest registration first. */
  async listForUser(userId: string, limit: number, offset: number): Promise<StoredAgent[]> {
    const rows = await this.selectWithMailbox()
      .where('agents.user_id', '=', userId)
      .orderBy('agents.registered_at')
      .orderBy('agents.address')
      .limit(limit)
      .offset(offset)
      .execute();
    return rows.map(toStoredAgent);
  }

  /**
   * Agents with their owner's name, by address, a page at a time after `afterAddress`: every
   * user's, or one user's (for the operator).
   */
  async listWithOwners(
    userId: string | undefined,
    afterAddress: string,
    limit: number,
  ): Promise<{ address: string; name: string; owner: string }[]> {
    let query = this.db
      .selectFrom('agents')
      .innerJoin('users', 'users.id', 'agents.user_id')
      .select(['agents.address', 'agents.name', 'users.name as owner'])
      .where('agents.address', '>', afterAddress);
    if (userId !== undefined) query = query.where('agents.user_id', '=', userId);
    return query.orderBy('agents.address').limit(limit).execute();
  }

  async countForUser(userId: string): Promise<number> {
    const row = await this.db
      .selectFrom('agents')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('user_id', '=', userId)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /**
   * Creates the listing, or replaces every field of an existing one except its owner, first
   * registration time and, when `listing` leaves it out, whether failed forwards are kept.
   */
  async save(listing: AgentListing): Promise<HandleTaken | undefined> {
    const values = {
      ...listing,
      profile: JSON.stringify(listing.profile),
      endpoints: JSON.stringify(listing.endpoints),
      protocols: JSON.stringify(listing.protocols),
      metadata: listing.metadata === null ? null : JSON.stringify(listing.metadata),
      // Left out (undefined), the column's default applies to a new row and an existing one
      // keeps its value.
      keep_failed_forwards: flag(listing.keep_failed_forwards),
    };
    const { address: _address, user_id: _owner, registered_at: _registered, ...replaced } = values;
    return this.refusingTakenHandle(
      this.db
        .insertInto('agents')
        .values(values)
        .onConflict((oc) => oc.column('address').doUpdateSet(replaced))
        .execute(),
    );
  }

  async update(address: string, changes: ListingChanges): Promise<HandleTaken | undefined> {
    const { profile, keep_failed_forwards: keep, ...plain } = changes;
    return this.refusingTakenHandle(
      this.db
        .updateTable('agents')
        .set({
          ...plain,
          ...(profile && { profile: JSON.stringify(profile) }),
          keep_failed_forwards: flag(keep),
        })
        .where('address', '=', address)
        .execute(),
    );
  }

  async delete(address: string): Promise<void> {
    await this.db.deleteFrom('agents').where('address', '=', address).execute();
  }

  /** Where the proxy forwards the agent's messages; undefined when it is not registered. */
  async findForwarding(address: string): Promise<Forwarding | undefined> {
    const row = await this.db
      .selectFrom('agents')
      .select(({ exists, selectFrom }) => [
        'redirect_url',
        'keep_failed_forwards',
        exists(
          selectFrom('forward_outages')
            .select('forward_outages.address')
            .whereRef('forward_outages.address', '=', 'agents.address'),
        ).as('failing'),
      ])
      .where('address', '=', address)
      .executeTakeFirst();
    return (
      row && {
        url: row.redirect_url,
        keep: row.keep_failed_forwards !== 0,
        failing: Boolean(row.failing),
      }
    );
  }

  async isRegistered(address: string): Promise<boolean> {
    return (await this.findForwarding(address)) !== undefined;
  }

  // The unique index decides who holds a handle, so two agents racing for one cannot both win.
  private async refusingTakenHandle(write: Promise<unknown>): Promise<HandleTaken | undefined> {
    try {
      await write;
      return undefined;
    } catch (err) {
      if (isUniqueViolation(err)) return 'handle-taken';
      throw err;
    }
  }
}
