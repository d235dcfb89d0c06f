import { sql, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import type { CompiledStatements } from '../compiled.js';
import type { DialectName } from '../dialect.js';
import { atomically, slices } from '../statements.js';
import { GONE_STATUSES } from '../../wire/activity.js';
import type {
  AlmanacManifestsTable,
  AlmanacRegistrationsTable,
  AlmanacStatusesTable,
  Database,
} from '../schema.js';

export type AlmanacRegistrationRow = Selectable<AlmanacRegistrationsTable>;
export type AlmanacStatusRow = Selectable<AlmanacStatusesTable>;
export type AlmanacManifestRow = Selectable<AlmanacManifestsTable>;

/** What a look-up reads of a registration, with the agent's name and whether it is active. */
export type ResolvableRow = Pick<
  AlmanacRegistrationRow,
  'prefix' | 'endpoints' | 'protocols' | 'metadata' | 'expires_at'
> & {
  /** 1 when the agent is active at the time asked for ({@link almanacActiveAt}), else 0. */
  active: number;
  domain: string | null;
};

/** What storing a registration said of it: see {@link AlmanacRepository.register}. */
export interface StoredRegistration {
  /** Whether the agent is registered here (has a listing). */
  agent: boolean;
  /** The protocols its stored registration declared before (JSON text); undefined when new. */
  before: string | undefined;
}

/** The registration's columns, in the order the statements of registration write them. */
const REGISTRATION_COLUMNS = [
  'address',
  'prefix',
  'endpoints',
  'protocols',
  'metadata',
  'signed_at',
  'signature',
  'expires_at',
  'updated_at',
] as const;

/**
 * The upsert condition of a signed write: the incoming message was signed later than the
 * stored one, or in the same second with another signature (a different message of that
 * second). A message older than the stored one, or the stored one itself again, is not
 * written.
 */
function newerOrSameSecond(table: 'almanac_registrations' | 'almanac_statuses') {
  const signedAt = sql.ref(`${table}.signed_at`);
  const signature = sql.ref(`${table}.signature`);
  return sql<boolean>`(${signedAt} < excluded.signed_at or (${signedAt} = excluded.signed_at and ${signature} <> excluded.signature))`;
}

/** {@link GONE_STATUSES} as a list of SQL literals. */
const goneStatuses = sql.join(GONE_STATUSES.map((status) => sql.lit(status)));

/**
 * Whether the agent's status says nobody is there ({@link GONE_STATUSES}: offline or
 * unreachable; an agent never seen is no evidence) since its record was last made current: since its unexpired Almanac registration
 * was stored (a status recorded in the same millisecond as the registration was decided without
 * it), or at all for an agent whose record is its listing. `address` is a column reference.
 */
export function presenceGoneSince(address: RawBuilder<unknown>, now: number): RawBuilder<boolean> {
  return sql<boolean>`exists (select 1 from agent_presence ap where ap.address = ${address}
    and ap.last_seen_at is not null and ap.status in (${goneStatuses})
    and ap.status_at > coalesce((select max(ar.updated_at) from almanac_registrations ar
      where ar.address = ${address} and ar.expires_at > ${now}), -1))`;
}

/** What the rule of active reads of an agent, each a condition that is never null. */
interface ActiveFacts {
  /** An unexpired registration, or (an enrolled agent that registered itself) listed endpoints. */
  current: RawBuilder<boolean>;
  /** Its latest signed status update says it stopped. */
  stopped: RawBuilder<boolean>;
  /** It is hosted here and not running. */
  hostedDown: RawBuilder<boolean>;
  /** Its status has said since its record was made current that nobody is there. */
  gone: RawBuilder<boolean>;
}

/** The rule of active (docs/almanac.md, "Active"), whichever way its facts are read. */
function activeRule(facts: ActiveFacts): RawBuilder<boolean> {
  return sql<boolean>`(${facts.current} and not ${facts.stopped} and not ${facts.hostedDown}
    and not ${facts.gone})`;
}

/**
 * Whether the agent at `address` (a column reference) is active at `now`, as the Almanac
 * resolves it, its search answers it, the registry's search shows it and its own status says
 * it: one definition for all of them (docs/almanac.md, "Active"). It has a current record (an
 * unexpired registration, or, for an enrolled agent that registered itself, its listing's
 * endpoints); it has not told the Almanac it stopped; a hosted agent is running; and its status
 * has not said since that nobody is there ({@link presenceGoneSince}).
 */
export function almanacActiveAt(address: RawBuilder<unknown>, now: number): RawBuilder<boolean> {
  return activeRule({
    current: sql<boolean>`(exists (select 1 from almanac_registrations ar where ar.address = ${address} and ar.expires_at > ${now})
      or exists (select 1 from agent_enrolments ae join agents aa on aa.address = ae.address
        where ae.address = ${address} and aa.endpoints <> '[]'))`,
    stopped: sql<boolean>`exists (select 1 from almanac_statuses st where st.address = ${address} and st.is_active = 0)`,
    hostedDown: sql<boolean>`exists (select 1 from hosted_agents ha where ha.address = ${address} and ha.state <> 'running')`,
    gone: presenceGoneSince(address, now),
  });
}

/**
 * {@link presenceGoneSince}, read from the agent's presence `p` and registration `r`, each joined
 * by the agent's address (either may be absent).
 */
export function presenceGoneOfJoined(now: number): RawBuilder<boolean> {
  return sql<boolean>`coalesce(p.last_seen_at is not null and p.status in (${goneStatuses})
    and p.status_at > coalesce(case when r.expires_at > ${now} then r.updated_at end, -1), false)`;
}

/**
 * {@link almanacActiveAt}, read from the agent's own rows joined by its address rather than from
 * correlated subqueries: `a` its listing, `r` its registration, `e` its enrolment, `st` its
 * status update, `ha` its hosted agent, `p` its presence. Any of them may be absent; none holds
 * more than one row per agent, so the joins add no rows. Searches read this form: PostgreSQL
 * cannot turn a subquery inside `or` or `case` into a join and, expecting many rows (a text
 * search matching ten listings is estimated at 2,000), reads such a subquery's whole table into
 * a hash instead (every registration, for ten matches); joins it plans by the rows it expects,
 * as look-ups by key or as one pass.
 * A store test holds the two forms to the same answer in every state the rule looks at.
 */
export function activeOfJoined(now: number): RawBuilder<boolean> {
  return activeRule({
    current: sql<boolean>`(coalesce(r.expires_at > ${now}, false)
      or (e.address is not null and coalesce(a.endpoints <> '[]', false)))`,
    stopped: sql<boolean>`coalesce(st.is_active = 0, false)`,
    hostedDown: sql<boolean>`coalesce(ha.state <> 'running', false)`,
    gone: presenceGoneOfJoined(now),
  });
}

/** Signed registrations and status updates, and protocol manifests. */
export class AlmanacRepository {
  constructor(
    private readonly db: Kysely<Database>,
    /** Registration's statements, compiled once per shape for this database. */
    private readonly statements: CompiledStatements,
    private readonly dialect: DialectName,
  ) {}

  /**
   * Stores registrations (each agent at most once in `rows`) as {@link upsertRegistrations}
   * does, and keeps the protocol index in step: an agent whose registration now declares other
   * protocols than its stored one did has its rows replaced by `digests` (its declared digests,
   * normalised); one that declares the same keeps them (agents re-register every hour with what
   * they declared before). Answers, for each address stored, whether it is an agent registered
   * here and what it declared before. On SQLite it is up to four statements: run it in a
   * transaction. On PostgreSQL it is one statement a thousand rows, atomic by itself.
   */
  async register(
    rows: AlmanacRegistrationRow[],
    digests: ReadonlyMap<string, readonly string[]>,
  ): Promise<Map<string, StoredRegistration>> {
    if (this.dialect === 'postgres') {
      const answered = new Map<string, StoredRegistration>();
      for (const slice of slices(rows)) {
        for (const [address, stored] of await this.registerInOneStatement(slice, digests)) {
          answered.set(address, stored);
        }
      }
      return answered;
    }
    const before = await this.declaredProtocols(rows.map((row) => row.address));
    const stored = await this.upsertRegistrations(rows);
    const declared = new Map<string, string[]>();
    const answered = new Map<string, StoredRegistration>();
    for (const row of rows) {
      const agent = stored.get(row.address);
      if (agent === undefined) continue;
      const previous = before.get(row.address);
      answered.set(row.address, { agent, before: previous });
      if (previous !== row.protocols)
        declared.set(row.address, [...(digests.get(row.address) ?? [])]);
    }
    if (declared.size > 0) {
      await this.replaceProtocols(
        declared,
        [...declared.keys()].filter((address) => before.has(address)),
      );
    }
    return answered;
  }

  /**
   * {@link register} on PostgreSQL, in one statement: one round trip where the read of what was
   * declared before, the upsert, the protocol rows and the transaction's begin and commit took
   * five. Every part reads the tables as they were before the statement (the read of what was
   * declared before among them); the protocol rows that stay are neither deleted nor written
   * again, so the delete and the insert never touch the same row.
   */
  private async registerInOneStatement(
    rows: AlmanacRegistrationRow[],
    digests: ReadonlyMap<string, readonly string[]>,
  ): Promise<Map<string, StoredRegistration>> {
    const declared = rows.flatMap((row) =>
      [...new Set(digests.get(row.address) ?? [])].map((digest) => [row.address, digest]),
    );
    const addresses = rows.map((row) => row.address);
    const declaredBy = declared.map(([address]) => address);
    const declaredDigests = declared.map(([, digest]) => digest);
    const values = () =>
      sql.join(
        rows.map(
          (row) => sql`(${sql.join(REGISTRATION_COLUMNS.map((column) => sql`${row[column]}`))})`,
        ),
      );
    const update = sql.join(
      REGISTRATION_COLUMNS.filter((column) => column !== 'address').map(
        (column) => sql`${sql.ref(column)} = excluded.${sql.ref(column)}`,
      ),
    );
    const statement = () => sql<{ address: string; agent: boolean; before: string | null }>`
      with before as (
        select address, protocols from almanac_registrations
        where address = any(cast(${addresses} as text[]))
      ), stored as (
        insert into almanac_registrations (${sql.join(REGISTRATION_COLUMNS.map((c) => sql.ref(c)))})
        values ${values()}
        on conflict (address) do update set ${update}
        where ${newerOrSameSecond('almanac_registrations')}
        returning address, protocols, exists (
          select 1 from agents where agents.address = almanac_registrations.address
        ) as agent
      ), changed as (
        select s.address from stored s left join before b on b.address = s.address
        where b.protocols is distinct from s.protocols
      ), declared as (
        select d.address, d.digest
        from unnest(cast(${declaredBy} as text[]), cast(${declaredDigests} as text[]))
          as d (address, digest)
        join changed c on c.address = d.address
      ), dropped as (
        -- By the index on address, from the list given again: joined to changed, whose few
        -- rows the planner cannot see, the whole table was read.
        delete from almanac_protocols p
        where p.address = any(cast(${addresses} as text[]))
          and p.address in (select address from changed)
          and not exists (select 1 from declared d where d.address = p.address and d.digest = p.digest)
      ), added as (
        insert into almanac_protocols (digest, address)
        select digest, address from declared
        on conflict do nothing
      )
      select s.address, s.agent, b.protocols as before
      from stored s left join before b on b.address = s.address`;
    const { rows: written } = await this.statements.execute(
      this.db,
      `almanac.register ${rows.length}`,
      [
        addresses,
        ...rows.flatMap((row) => REGISTRATION_COLUMNS.map((column) => row[column])),
        declaredBy,
        declaredDigests,
        addresses,
      ],
      () => statement().compile(this.db),
    );
    return new Map(
      written.map(({ address, agent, before }) => [
        address,
        { agent, before: before ?? undefined },
      ]),
    );
  }

  /**
   * Stores each registration (each agent at most once in `rows`) unless the stored one was
   * signed later, or is this very message (same timestamp and signature: a resend changes
   * nothing), in one statement per thousand so that of two racing writers the newer always
   * wins. uAgents signs whole seconds, so two registrations of the same second are both
   * genuine: the last one received wins. Answers the addresses whose registration was stored,
   * each with whether it is an agent registered here (read by the same statement).
   */
  async upsertRegistrations(rows: AlmanacRegistrationRow[]): Promise<Map<string, boolean>> {
    const stored = new Map<string, boolean>();
    for (const slice of slices(rows)) {
      const written = await this.statements.insert(
        this.db,
        'almanac_registrations.upsert',
        slice,
        // Built only when its shape is new (or its rows set different columns).
        () =>
          this.db
            .insertInto('almanac_registrations')
            .values(slice)
            .onConflict((oc) =>
              oc
                .column('address')
                .doUpdateSet((eb) => ({
                  prefix: eb.ref('excluded.prefix'),
                  endpoints: eb.ref('excluded.endpoints'),
                  protocols: eb.ref('excluded.protocols'),
                  metadata: eb.ref('excluded.metadata'),
                  signed_at: eb.ref('excluded.signed_at'),
                  signature: eb.ref('excluded.signature'),
                  expires_at: eb.ref('excluded.expires_at'),
                  updated_at: eb.ref('excluded.updated_at'),
                }))
                .where(newerOrSameSecond('almanac_registrations')),
            )
            .returning((eb) => [
              'address',
              eb
                .exists(
                  eb
                    .selectFrom('agents')
                    .select(sql`1`.as('one'))
                    .whereRef('agents.address', '=', 'almanac_registrations.address'),
                )
                .as('agent'),
            ]),
      );
      // PostgreSQL answers a boolean, SQLite 1 or 0.
      for (const { address, agent } of written) stored.set(address, Boolean(agent));
    }
    return stored;
  }

  /** The protocols (as stored: JSON text) that the registrations of `addresses` declare. */
  async declaredProtocols(addresses: string[]): Promise<Map<string, string>> {
    const declared = new Map<string, string>();
    for (const slice of slices(addresses)) {
      const { rows } = await this.statements.execute(
        this.db,
        `almanac_registrations.protocols ${slice.length}`,
        slice,
        () =>
          this.db
            .selectFrom('almanac_registrations')
            .select(['address', 'protocols'])
            .where('address', 'in', slice)
            .compile(),
      );
      for (const row of rows) declared.set(row.address, row.protocols);
    }
    return declared;
  }

  /**
   * Writes the protocols that registrations declare (`proto:` and hex, each once), for every
   * agent of `declared` at once, after deleting those of `replaced` (agents that had
   * declared protocols before; a new agent has none to delete).
   */
  async replaceProtocols(declared: Map<string, string[]>, replaced: string[]): Promise<void> {
    for (const slice of slices(replaced)) {
      await this.db.deleteFrom('almanac_protocols').where('address', 'in', slice).execute();
    }
    const rows = [...declared].flatMap(([address, digests]) =>
      [...new Set(digests)].map((digest) => ({ digest, address })),
    );
    for (const slice of slices(rows)) {
      await this.statements.insert(this.db, 'almanac_protocols.insert', slice, () =>
        this.db.insertInto('almanac_protocols').values(slice),
      );
    }
  }

  findRegistration(address: string): Promise<AlmanacRegistrationRow | undefined> {
    return this.db
      .selectFrom('almanac_registrations')
      .selectAll()
      .where('address', '=', address)
      .executeTakeFirst();
  }

  /**
   * What resolution needs, in one indexed lookup: the registration, its name, and whether the
   * agent is active at `now` by the rule of {@link almanacActiveAt}, read here from joined rows
   * rather than its correlated subqueries. For an agent known to have this registration the two
   * agree (the store tests hold them to it); PostgreSQL plans the joins in less than half the
   * time, and, the statement being kept prepared, once per connection rather than per look-up.
   * An expired registration is not active by itself (resolution then looks at the agent's
   * listing).
   */
  async findResolvable(address: string, now: number): Promise<ResolvableRow | undefined> {
    return this.statements.first(
      this.db,
      'almanac_registrations.resolvable',
      [now, 0, 'running', address],
      () =>
        this.db
          .selectFrom('almanac_registrations as r')
          .leftJoin('domain_agents as d', 'd.address', 'r.address')
          .leftJoin('almanac_statuses as st', (join) =>
            join.onRef('st.address', '=', 'r.address').on('st.is_active', '=', 0),
          )
          .leftJoin('hosted_agents as ha', (join) =>
            join.onRef('ha.address', '=', 'r.address').on('ha.state', '<>', 'running'),
          )
          .leftJoin('agent_presence as ap', (join) =>
            join
              .onRef('ap.address', '=', 'r.address')
              .on('ap.last_seen_at', 'is not', null)
              .on(sql<boolean>`ap.status in (${goneStatuses})`)
              .onRef('ap.status_at', '>', 'r.updated_at'),
          )
          // Named columns, not r.*: a kept plan whose result gained a column (a migration run
          // by a newer replica) would fail on the connections that kept it.
          .select([
            'r.prefix',
            'r.endpoints',
            'r.protocols',
            'r.metadata',
            'r.expires_at',
            'd.domain',
            sql<number>`case when r.expires_at > ${now} and st.address is null
              and ha.address is null and ap.address is null then 1 else 0 end`.as('active'),
          ])
          .where('r.address', '=', address)
          .compile(),
      { prepared: true },
    );
  }

  /** Whether the agent is active at `now` ({@link almanacActiveAt}). */
  async activeAt(address: string, now: number): Promise<boolean> {
    const row = await sql<{
      active: number | boolean;
    }>`select case when ${almanacActiveAt(sql`${address}`, now)} then 1 else 0 end as active`.execute(
      this.db,
    );
    return Number(row.rows[0]?.active) === 1;
  }

  /** As {@link upsertRegistration}, for status updates and their own watermark. */
  async upsertStatus(row: AlmanacStatusRow): Promise<boolean> {
    const stored = await this.db
      .insertInto('almanac_statuses')
      .values(row)
      .onConflict((oc) =>
        oc
          .column('address')
          .doUpdateSet((eb) => ({
            is_active: eb.ref('excluded.is_active'),
            signed_at: eb.ref('excluded.signed_at'),
            signature: eb.ref('excluded.signature'),
            updated_at: eb.ref('excluded.updated_at'),
          }))
          .where(newerOrSameSecond('almanac_statuses')),
      )
      .returning('address')
      .executeTakeFirst();
    return stored !== undefined;
  }

  findStatus(address: string): Promise<AlmanacStatusRow | undefined> {
    return this.db
      .selectFrom('almanac_statuses')
      .selectAll()
      .where('address', '=', address)
      .executeTakeFirst();
  }

  /**
   * Drops registrations that expired, and statuses signed before `statusesSignedBefore` of
   * agents without a registration. Returns how many rows went.
   */
  async deleteExpired(now: number, statusesSignedBefore: number): Promise<number> {
    const registrations = await this.db
      .deleteFrom('almanac_registrations')
      .where('expires_at', '<=', now)
      .executeTakeFirst();
    const statuses = await this.db
      .deleteFrom('almanac_statuses')
      .where('signed_at', '<', statusesSignedBefore)
      .where((eb) =>
        eb.not(
          eb.exists(
            eb
              .selectFrom('almanac_registrations')
              .select('almanac_registrations.address')
              .whereRef('almanac_registrations.address', '=', 'almanac_statuses.address'),
          ),
        ),
      )
      .executeTakeFirst();
    return Number(registrations.numDeletedRows) + Number(statuses.numDeletedRows);
  }

  /**
   * Stores a manifest under its digest, with the models it holds (`models`). A verified
   * manifest replaces an unverified one; an unverified one never replaces anything, so nobody
   * can overwrite what is stored with content that does not hash to its key.
   */
  storeManifest(row: AlmanacManifestRow, models: string[]): Promise<void> {
    return atomically(this.db, async (db) => {
      const written = await db
        .insertInto('almanac_manifests')
        .values(row)
        .onConflict((oc) =>
          oc
            .column('digest')
            .doUpdateSet((eb) => ({
              manifest: eb.ref('excluded.manifest'),
              verified: eb.ref('excluded.verified'),
              stored_at: eb.ref('excluded.stored_at'),
              name: eb.ref('excluded.name'),
              version: eb.ref('excluded.version'),
            }))
            .where((eb) =>
              eb.and([eb('almanac_manifests.verified', '=', 0), eb('excluded.verified', '=', 1)]),
            ),
        )
        .returning('digest')
        .executeTakeFirst();
      if (!written) return;
      await db.deleteFrom('almanac_manifest_models').where('digest', '=', row.digest).execute();
      for (const slice of slices(
        [...new Set(models)].map((model) => ({ model, digest: row.digest })),
      )) {
        await db.insertInto('almanac_manifest_models').values(slice).execute();
      }
    });
  }

  findManifest(digest: string): Promise<AlmanacManifestRow | undefined> {
    return this.db
      .selectFrom('almanac_manifests')
      .selectAll()
      .where('digest', '=', digest)
      .executeTakeFirst();
  }

  /** The manifests stored under a name, without their text (a name has a few versions). */
  manifestsNamed(name: string): Promise<Omit<AlmanacManifestRow, 'manifest'>[]> {
    return this.db
      .selectFrom('almanac_manifests')
      .select(['digest', 'name', 'version', 'verified', 'stored_at'])
      .where('name', '=', name)
      .execute();
  }

  /** A manifest holding the model, a verified one first, then the latest stored. */
  manifestWithModel(model: string): Promise<AlmanacManifestRow | undefined> {
    return this.db
      .selectFrom('almanac_manifest_models as m')
      .innerJoin('almanac_manifests as a', 'a.digest', 'm.digest')
      .selectAll('a')
      .where('m.model', '=', model)
      .orderBy('a.verified', 'desc')
      .orderBy('a.stored_at', 'desc')
      .orderBy('a.digest')
      .limit(1)
      .executeTakeFirst();
  }
}
