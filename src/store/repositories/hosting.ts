import { sql, type Insertable, type Kysely, type Selectable, type Updateable } from 'kysely';
import type { DialectName } from '../dialect.js';
import type {
  Database,
  HostedAgentsTable,
  HostedFailuresTable,
  HostedLogsTable,
  HostedStorageTable,
  HostingSecretsTable,
} from '../schema.js';
import { slices } from '../statements.js';

export type HostedAgentRow = Selectable<HostedAgentsTable>;
export type HostedAgentChanges = Omit<Updateable<HostedAgentsTable>, 'address' | 'owner_id'>;
export type HostingSecretRow = Selectable<HostingSecretsTable>;
export type HostedStorageRow = Selectable<HostedStorageTable>;
export type HostedLogRow = Selectable<HostedLogsTable>;
export type NewHostedLog = Omit<Insertable<HostedLogsTable>, 'id'>;
export type HostedFailureRow = Selectable<HostedFailuresTable>;

/**
 * Errors a hosted agent's log told of together, or a crash of its process: how many of each,
 * when, the last one's text.
 */
export interface HostedErrors {
  first: number;
  last: number;
  /** Error lines. */
  count: number;
  /** Crashes (and failures to start). */
  crashes: number;
  error: string;
}

/** A hosted agent with what its listing says of it. */
export type HostedAgentListed = HostedAgentRow & {
  name: string;
  /** The listing's profile, as JSON text. */
  profile: string;
  updated_at: number;
};

/** How a list of hosted agents is ordered. */
export type HostedAgentOrder = 'created' | 'modified' | 'name';

export interface HostedAgentQuery {
  /** Only agents whose name holds this text, whatever its case. */
  name?: string;
  order: HostedAgentOrder;
  descending: boolean;
  limit: number;
  offset: number;
}

/** A runner's hold on an agent, as the runner renews it. */
export interface HeldAgent {
  address: string;
  desired_state: string;
  code_digest: string | null;
  network: string;
}

/** What an agent's storage holds: how many keys, and their keys' and values' bytes. */
export interface StorageUsage {
  keys: number;
  bytes: number;
}

const LIKE_SPECIAL = /[\\%_]/g;

/**
 * Hosted agents and everything kept about them: secrets, storage, logs, and the runners that
 * hold them (by lease, so that any number of runner processes on one database agree on who
 * runs what).
 */
export class HostingRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectName,
  ) {}

  // ---- Agents --------------------------------------------------------------------------

  async insert(row: HostedAgentRow): Promise<void> {
    await this.db.insertInto('hosted_agents').values(row).execute();
  }

  find(address: string): Promise<HostedAgentRow | undefined> {
    return this.db
      .selectFrom('hosted_agents')
      .selectAll()
      .where('address', '=', address)
      .executeTakeFirst();
  }

  /** The hosted agent and its listing, when it is the owner's. */
  findListed(address: string, ownerId: string): Promise<HostedAgentListed | undefined> {
    return this.listed()
      .where('h.address', '=', address)
      .where('h.owner_id', '=', ownerId)
      .executeTakeFirst();
  }

  /** A page of the owner's hosted agents with their listings. */
  listForOwner(ownerId: string, query: HostedAgentQuery): Promise<HostedAgentListed[]> {
    const direction = query.descending ? 'desc' : 'asc';
    const column = { created: 'h.created_at', modified: 'a.updated_at', name: 'a.name' } as const;
    let select = this.listed().where('h.owner_id', '=', ownerId);
    if (query.name !== undefined && query.name !== '') {
      const pattern = `%${query.name.toLowerCase().replace(LIKE_SPECIAL, (c) => `\\${c}`)}%`;
      select = select.where(sql<boolean>`lower(a.name) like ${pattern} escape '\\'`);
    }
    return select
      .orderBy(column[query.order], direction)
      .orderBy('h.address', direction)
      .limit(query.limit)
      .offset(query.offset)
      .execute();
  }

  private listed() {
    return this.db
      .selectFrom('hosted_agents as h')
      .innerJoin('agents as a', 'a.address', 'h.address')
      .selectAll('h')
      .select(['a.name', 'a.profile', 'a.updated_at']);
  }

  /**
   * Opens the agent's failure with these errors (or this crash); the row when this call opened it, undefined
   * when one was open already.
   */
  openFailure(address: string, errors: HostedErrors): Promise<HostedFailureRow | undefined> {
    return this.db
      .insertInto('hosted_failures')
      .values({
        address,
        began_at: errors.first,
        last_at: errors.last,
        errors: errors.count,
        crashes: errors.crashes,
        error: errors.error,
      })
      .onConflict((oc) => oc.column('address').doNothing())
      .returningAll()
      .executeTakeFirst();
  }

  /** Adds errors (or a crash) to the agent's open failure; the row as it now stands, undefined when none is. */
  extendFailure(address: string, errors: HostedErrors): Promise<HostedFailureRow | undefined> {
    return this.db
      .updateTable('hosted_failures')
      .set((eb) => ({
        last_at: sql<number>`case when last_at < ${errors.last} then ${errors.last} else last_at end`,
        errors: eb('errors', '+', errors.count),
        crashes: eb('crashes', '+', errors.crashes),
        error: sql<string>`case when last_at <= ${errors.last} then ${errors.error} else error end`,
      }))
      .where('address', '=', address)
      .returningAll()
      .executeTakeFirst();
  }

  /** Notes the timeline row that stands for the failure that began at `beganAt`. */
  async setFailureEntry(address: string, beganAt: number, entryId: number): Promise<void> {
    await this.db
      .updateTable('hosted_failures')
      .set({ entry_id: entryId })
      .where('address', '=', address)
      .where('began_at', '=', beganAt)
      .execute();
  }

  /**
   * Ends the failures of agents that have run without an error since `quietSince`: no error
   * since, and running (not restarted) since; the rows this call ended.
   */
  endQuietFailures(quietSince: number, limit: number): Promise<HostedFailureRow[]> {
    return this.db
      .deleteFrom('hosted_failures')
      .where('address', 'in', (eb) =>
        eb
          .selectFrom('hosted_failures as f')
          .innerJoin('hosted_agents as h', 'h.address', 'f.address')
          .select('f.address')
          .where('f.last_at', '<=', quietSince)
          .where('h.state', '=', 'running')
          .where('h.state_changed_at', '<=', quietSince)
          .limit(limit),
      )
      .where('last_at', '<=', quietSince)
      .returningAll()
      .execute();
  }

  async update(address: string, changes: HostedAgentChanges): Promise<boolean> {
    const result = await this.db
      .updateTable('hosted_agents')
      .set(changes)
      .where('address', '=', address)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  /** Adds one to the revision (a change of the code or of the profile). */
  async bumpRevision(address: string, changes: HostedAgentChanges = {}): Promise<void> {
    await this.db
      .updateTable('hosted_agents')
      .set({ ...changes, revision: sql<number>`revision + 1` })
      .where('address', '=', address)
      .execute();
  }

  /**
   * Holds the agent's row until the transaction ends, so that two changes of its storage
   * cannot both pass the bounds (SQLite's transactions never overlap).
   */
  async lock(address: string): Promise<boolean> {
    if (this.dialect === 'sqlite') return (await this.find(address)) !== undefined;
    const row = await this.db
      .selectFrom('hosted_agents')
      .select('address')
      .where('address', '=', address)
      .forUpdate()
      .executeTakeFirst();
    return row !== undefined;
  }

  // ---- Runners -------------------------------------------------------------------------

  /** Records that the runner is alive; forgets runners not heard of since `forgetBefore`. */
  async heartbeat(id: string, host: string, capacity: number, now: number, forgetBefore: number) {
    await this.db
      .insertInto('hosting_runners')
      .values({ id, host, capacity, seen_at: now })
      .onConflict((oc) => oc.column('id').doUpdateSet({ host, capacity, seen_at: now }))
      .execute();
    await this.db.deleteFrom('hosting_runners').where('seen_at', '<', forgetBefore).execute();
  }

  async countRunnersSeenSince(since: number): Promise<number> {
    const row = await this.db
      .selectFrom('hosting_runners')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('seen_at', '>=', since)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async countHeld(runnerId: string, now: number): Promise<number> {
    const row = await this.db
      .selectFrom('hosted_agents')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('runner_id', '=', runnerId)
      .where('lease_expires_at', '>', now)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /**
   * Gives the runner up to `max` agents meant to run that no runner holds (or whose holder's
   * lease ran out), oldest state change first; answers the addresses it took. The condition is
   * checked again on the row being updated, so that of two runners claiming at once only one
   * gets each agent.
   */
  async claim(runnerId: string, max: number, now: number, leaseUntil: number): Promise<string[]> {
    if (max <= 0) return [];
    const free = this.db
      .selectFrom('hosted_agents')
      .select('address')
      .where('desired_state', '=', 'running')
      .where((eb) => eb.or([eb('runner_id', 'is', null), eb('lease_expires_at', '<=', now)]))
      .orderBy('state_changed_at')
      .orderBy('address')
      .limit(max);
    // The candidates are picked once (a CTE: PostgreSQL may run an `in (…)` subquery again for
    // each row, and its limit with it); on PostgreSQL, runners claiming at once pass over each
    // other's rows instead of waiting for them and finding them taken.
    const rows = await this.db
      .with('picked', () => (this.dialect === 'postgres' ? free.forUpdate().skipLocked() : free))
      .updateTable('hosted_agents')
      .from('picked')
      .set({ runner_id: runnerId, lease_expires_at: leaseUntil })
      .whereRef('hosted_agents.address', '=', 'picked.address')
      .where('desired_state', '=', 'running')
      .where((eb) =>
        eb.or([
          eb('hosted_agents.runner_id', 'is', null),
          eb('hosted_agents.lease_expires_at', '<=', now),
        ]),
      )
      .returning('hosted_agents.address')
      .execute();
    return rows.map((row) => row.address);
  }

  /** Extends the runner's hold on every agent it still holds, and answers them. */
  async renew(runnerId: string, leaseUntil: number): Promise<HeldAgent[]> {
    return this.db
      .updateTable('hosted_agents')
      .set({ lease_expires_at: leaseUntil })
      .where('runner_id', '=', runnerId)
      .returning(['address', 'desired_state', 'code_digest', 'network'])
      .execute();
  }

  /** Ends the runner's hold on the agent, if it still has it. */
  async release(runnerId: string, address: string): Promise<void> {
    await this.db
      .updateTable('hosted_agents')
      .set({ runner_id: null, lease_expires_at: null })
      .where('address', '=', address)
      .where('runner_id', '=', runnerId)
      .execute();
  }

  // ---- Secrets -------------------------------------------------------------------------

  async putSecret(row: HostingSecretRow): Promise<void> {
    await this.db
      .insertInto('hosting_secrets')
      .values(row)
      .onConflict((oc) =>
        oc.columns(['address', 'name']).doUpdateSet({
          ciphertext: row.ciphertext,
          created_at: row.created_at,
        }),
      )
      .execute();
  }

  secrets(address: string): Promise<HostingSecretRow[]> {
    return this.db
      .selectFrom('hosting_secrets')
      .selectAll()
      .where('address', '=', address)
      .orderBy('name')
      .execute();
  }

  /** Every secret of the owner's hosted agents, by agent then name. */
  secretsOfOwner(ownerId: string): Promise<HostingSecretRow[]> {
    return this.db
      .selectFrom('hosting_secrets as s')
      .innerJoin('hosted_agents as h', 'h.address', 's.address')
      .selectAll('s')
      .where('h.owner_id', '=', ownerId)
      .orderBy('h.created_at')
      .orderBy('s.address')
      .orderBy('s.name')
      .execute();
  }

  async countSecrets(address: string): Promise<number> {
    const row = await this.db
      .selectFrom('hosting_secrets')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('address', '=', address)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async deleteSecret(address: string, name: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('hosting_secrets')
      .where('address', '=', address)
      .where('name', '=', name)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  // ---- Storage -------------------------------------------------------------------------

  async storageGet(address: string, key: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('hosted_storage')
      .select('value')
      .where('address', '=', address)
      .where('key', '=', key)
      .executeTakeFirst();
    return row?.value;
  }

  /** The keys after `after` (all from the first when undefined), in order, with their values. */
  storagePage(
    address: string,
    after: string | undefined,
    limit: number,
  ): Promise<Pick<HostedStorageRow, 'key' | 'value'>[]> {
    let select = this.db
      .selectFrom('hosted_storage')
      .select(['key', 'value'])
      .where('address', '=', address);
    if (after !== undefined) select = select.where('key', '>', after);
    return select.orderBy('key').limit(limit).execute();
  }

  /** How much the agent's storage holds, leaving out `except` (a key about to be replaced). */
  async storageUsage(address: string, except?: string): Promise<StorageUsage> {
    const bytes =
      this.dialect === 'postgres'
        ? sql<number>`coalesce(sum(octet_length(key) + octet_length(value)), 0)`
        : sql<number>`coalesce(sum(length(cast(key as blob)) + length(cast(value as blob))), 0)`;
    let select = this.db
      .selectFrom('hosted_storage')
      .select((eb) => [eb.fn.countAll<number>().as('keys'), bytes.as('bytes')])
      .where('address', '=', address);
    if (except !== undefined) select = select.where('key', '!=', except);
    const row = await select.executeTakeFirstOrThrow();
    return { keys: Number(row.keys), bytes: Number(row.bytes) };
  }

  async storageSet(row: HostedStorageRow): Promise<void> {
    await this.db
      .insertInto('hosted_storage')
      .values(row)
      .onConflict((oc) =>
        oc
          .columns(['address', 'key'])
          .doUpdateSet({ value: row.value, updated_at: row.updated_at }),
      )
      .execute();
  }

  async storageDelete(address: string, key: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('hosted_storage')
      .where('address', '=', address)
      .where('key', '=', key)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  async storageClear(address: string): Promise<number> {
    const result = await this.db
      .deleteFrom('hosted_storage')
      .where('address', '=', address)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  // ---- Logs ----------------------------------------------------------------------------

  /** Adds the lines, then keeps only the newest `keep` of the agent's. */
  async appendLogs(address: string, lines: NewHostedLog[], keep: number): Promise<void> {
    for (const slice of slices(lines)) {
      await this.db.insertInto('hosted_logs').values(slice).execute();
    }
    await sql`
      delete from hosted_logs where address = ${address} and id <= (
        select id from hosted_logs where address = ${address}
        order by id desc limit 1 offset ${keep})`.execute(this.db);
  }

  /** The newest `limit` lines of the agent, oldest first. */
  async latestLogs(address: string, limit: number): Promise<HostedLogRow[]> {
    const rows = await this.db
      .selectFrom('hosted_logs')
      .selectAll()
      .where('address', '=', address)
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.reverse();
  }

  async clearLogs(address: string): Promise<void> {
    await this.db.deleteFrom('hosted_logs').where('address', '=', address).execute();
  }
}
