import { sql, type Insertable, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import type { DialectName } from '../dialect.js';
import type {
  Database,
  MailboxesTable,
  MessagesTable,
  QuarantinedMessagesTable,
} from '../schema.js';
import { CompiledStatements } from '../compiled.js';
import { atomically, MAX_ROWS_PER_INSERT, slices } from '../statements.js';
import {
  insertDeliveryEvents,
  insertDeliveryEventsReturning,
  EXPIRED_UNFORWARDED_DETAIL,
  KEPT_DETAIL,
  type DeliveryEventRow,
  type NewDeliveryEvent,
} from './deliveries.js';
import { addUsage, type PeriodCounters, type QuotaOverrides } from './usage.js';

export type MailboxRow = Selectable<MailboxesTable>;
export type MessageRow = Selectable<MessagesTable>;
export type NewMessage = Insertable<MessagesTable>;
/** A message moved aside, as its owner sees it. */
export type QuarantinedMessage = Omit<Selectable<QuarantinedMessagesTable>, 'id' | 'address'>;

/** What a reader of a mailbox gets back for one message. */
export type PendingMessage = Pick<
  MessageRow,
  'uuid' | 'envelope' | 'size' | 'received_at' | 'expires_at' | 'polled_at' | 'next_forward_at'
>;

/** The columns a {@link PendingMessage} holds. */
const PENDING = [
  'uuid',
  'envelope',
  'size',
  'received_at',
  'expires_at',
  'polled_at',
  'next_forward_at',
] as const;

/** A kept message a process claimed to forward, until `lease` (its `next_forward_at` now). */
export interface ClaimedForward extends Pick<
  MessageRow,
  'uuid' | 'address' | 'envelope' | 'size' | 'sender' | 'digest' | 'forward_attempts'
> {
  lease: number;
  /** The agent's registered URL now; null when it has none. */
  url: string | null;
}

/** A mailbox with what its owner's quotas are measured against, read in one statement. */
export interface MailboxWithOwnerUsage {
  mailbox: MailboxRow;
  /** The owner's quota overrides; all null when the defaults apply. */
  overrides: QuotaOverrides;
  /** The owner's counters in the requested period. */
  counters: PeriodCounters;
  /** Bytes held in all of the owner's mailboxes. */
  ownerBytesStored: number;
}

/**
 * What a message leaving its mailbox takes into the delivery trace; `forward_attempts` says
 * whether the proxy kept it (read wherever it may have).
 */
type LeavingMessage = Pick<
  MessageRow,
  'uuid' | 'address' | 'size' | 'received_at' | 'sender' | 'digest'
> &
  Partial<Pick<MessageRow, 'forward_attempts' | 'next_forward_at'>>;

/**
 * The trace rows of messages leaving their mailbox: the `stored` row that the pending
 * message stood for (when, sender, size, digest; whether the proxy kept it), then `event` at
 * `at`.
 */
function leavingRows(
  messages: LeavingMessage[],
  event: string,
  at: number,
  detail: (message: LeavingMessage) => string | null = () => null,
): NewDeliveryEvent[] {
  return messages.flatMap((m) => [
    {
      address: m.address,
      event: 'stored',
      at: m.received_at,
      uuid: m.uuid,
      digest: m.digest,
      sender: m.sender,
      size: m.size,
      detail: Number(m.forward_attempts ?? 0) > 0 ? KEPT_DETAIL : null,
    },
    // Who sent it, on the row of its fate too: the timeline shows the message by that row, and
    // whoever reads of a message that left unread alone (a webhook, the Failures filter) knows
    // whose it was.
    {
      address: m.address,
      event,
      at,
      uuid: m.uuid,
      digest: m.digest,
      sender: m.sender,
      size: m.size,
      detail: detail(m),
    },
  ]);
}

/**
 * The columns {@link leavingRows} reads. Quarantine reads them without `forward_attempts`: it
 * runs in migration 0011, before the column exists, and no message it moves was kept.
 */
const LEAVING = ['uuid', 'address', 'size', 'received_at', 'sender', 'digest'] as const;
const LEAVING_KEPT = [...LEAVING, 'forward_attempts'] as const;

/** What a group insert wrote. */
export interface Delivered {
  /** The uuids stored now, each with its row's id. */
  ids: Map<string, number>;
  /** The trace rows written with them (refusals, resubmissions), ids and all. */
  traced: DeliveryEventRow[];
}

/** The statement messages are stored with: a uuid stored already is skipped. */
export function insertMessagesQuery(db: Kysely<Database>, messages: NewMessage[]) {
  return db
    .insertInto('messages')
    .values(messages)
    .onConflict((oc) => oc.column('uuid').doNothing())
    .returning(['id', 'uuid', 'address', 'size']);
}

/**
 * Stores the messages, in order, except those whose uuid is taken (by a message stored
 * before or earlier in the list), and returns the id, uuid, mailbox and size of each one
 * stored. The counters are the caller's to move.
 */
async function insertMessages(
  db: Kysely<Database>,
  statements: CompiledStatements,
  messages: NewMessage[],
): Promise<Pick<MessageRow, 'id' | 'uuid' | 'address' | 'size'>[]> {
  const stored: Pick<MessageRow, 'id' | 'uuid' | 'address' | 'size'>[] = [];
  for (const slice of slices(messages)) {
    stored.push(
      ...(await statements.insert(db, 'messages.insert', slice, () =>
        insertMessagesQuery(db, slice),
      )),
    );
  }
  return stored;
}

/**
 * Moves the counters of the mailboxes that held `messages` (added with `sign` 1, removed with
 * -1), and their owners' stored bytes by the same amounts; returns the owner of each mailbox
 * that moved with the messages it counted, for the owners' usage. Mailboxes that no longer
 * exist move nothing. Run it in the transaction that added or removed the messages.
 */
async function moveCounters(
  db: Kysely<Database>,
  statements: CompiledStatements,
  messages: Pick<MessageRow, 'address' | 'size'>[],
  sign: 1 | -1,
): Promise<Map<string, number>> {
  const changes = new Map<string, { messages: number; bytes: number }>();
  for (const { address, size } of messages) {
    const change = changes.get(address) ?? { messages: 0, bytes: 0 };
    change.messages += sign;
    change.bytes += sign * Number(size);
    changes.set(address, change);
  }
  if (changes.size === 0) return new Map();
  // A VALUES list names its columns column1, column2… on both SQLite and PostgreSQL; the
  // casts tell PostgreSQL what the parameters are.
  const values = () =>
    [...changes].map(
      ([address, change]) =>
        sql`(${address}, cast(${change.messages} as bigint), cast(${change.bytes} as bigint))`,
    );
  const { rows: moved } = await statements.execute(
    db,
    `mailboxes.counters ${changes.size}`,
    [...changes].flatMap(([address, change]) => [address, change.messages, change.bytes]),
    () =>
      db
        .updateTable('mailboxes')
        .from(
          sql<{
            column1: string;
            column2: number;
            column3: number;
          }>`(values ${sql.join(values())})`.as('change'),
        )
        .set({
          pending_messages: sql`mailboxes.pending_messages + change.column2`,
          bytes_stored: sql`mailboxes.bytes_stored + change.column3`,
        })
        .whereRef('mailboxes.address', '=', 'change.column1')
        .returning(['mailboxes.address', 'mailboxes.user_id'])
        .compile(),
  );
  const bytesByOwner = new Map<string, number>();
  const messagesByOwner = new Map<string, number>();
  for (const { address, user_id } of moved) {
    const change = changes.get(address)!;
    bytesByOwner.set(user_id, (bytesByOwner.get(user_id) ?? 0) + change.bytes);
    messagesByOwner.set(user_id, (messagesByOwner.get(user_id) ?? 0) + change.messages);
  }
  await addToOwnersStorage(db, statements, bytesByOwner);
  return messagesByOwner;
}

/** Moves owners' totals of stored bytes (user id → bytes, negative to take off). */
async function addToOwnersStorage(
  db: Kysely<Database>,
  statements: CompiledStatements,
  bytesByOwner: Map<string, number>,
): Promise<void> {
  const changes = [...bytesByOwner].filter(([, bytes]) => bytes !== 0);
  if (changes.length === 0) return;
  await statements.execute(db, `user_storage.add ${changes.length}`, changes.flat(), () =>
    db
      .insertInto('user_storage')
      .values(changes.map(([user_id, bytes_stored]) => ({ user_id, bytes_stored })))
      .onConflict((oc) =>
        oc.column('user_id').doUpdateSet({
          bytes_stored: sql`user_storage.bytes_stored + excluded.bytes_stored`,
        }),
      )
      .compile(),
  );
}

/**
 * Moves the messages named (uuid → why the client cannot take it) out of their mailboxes
 * into quarantine, in one transaction with their counters: a quarantined message counts in
 * no quota. Returns how many moved (a message deleted meanwhile is not).
 */
function moveToQuarantine(
  db: Kysely<Database>,
  reasons: Map<string, string>,
  now: number,
): Promise<number> {
  return atomically(db, async (db) => {
    const removed = await db
      .deleteFrom('messages')
      .where('uuid', 'in', [...reasons.keys()])
      .returning([...LEAVING, 'envelope', 'expires_at'])
      .execute();
    if (removed.length === 0) return 0;
    for (const slice of slices(removed)) {
      await db
        .insertInto('quarantined_messages')
        .values(
          slice.map((message) => ({
            uuid: message.uuid,
            address: message.address,
            envelope: message.envelope,
            size: message.size,
            received_at: message.received_at,
            expires_at: message.expires_at,
            reason: reasons.get(message.uuid) ?? 'unservable',
            quarantined_at: now,
          })),
        )
        .onConflict((oc) => oc.column('uuid').doNothing())
        .execute();
    }
    const statements = new CompiledStatements();
    await moveCounters(db, statements, removed, -1);
    await insertDeliveryEvents(
      db,
      statements,
      leavingRows(removed, 'quarantined', now, (m) => reasons.get(m.uuid) ?? 'unservable'),
    );
    return removed.length;
  });
}

/**
 * One pass over every stored message, `batchSize` at a time in id order, moving to
 * quarantine those `reasonOf` finds a reason against (text and mailbox address → reason, or
 * undefined for a message that can be served). Returns how many moved.
 */
export async function quarantineUnservable(
  db: Kysely<Database>,
  reasonOf: (envelope: string, address: string) => string | undefined,
  now: number,
  batchSize = 500,
): Promise<number> {
  let moved = 0;
  let after = -1;
  for (;;) {
    const rows = await db
      .selectFrom('messages')
      .select(['id', 'uuid', 'address', 'envelope'])
      .where('id', '>', after)
      .orderBy('id')
      .limit(batchSize)
      .execute();
    if (rows.length === 0) return moved;
    after = Number(rows[rows.length - 1]!.id);
    const reasons = new Map<string, string>();
    for (const row of rows) {
      const reason = reasonOf(row.envelope, row.address);
      if (reason !== undefined) reasons.set(row.uuid, reason);
    }
    if (reasons.size > 0) moved += await moveToQuarantine(db, reasons, now);
    if (rows.length < batchSize) return moved;
  }
}

/**
 * What the mailbox writes differently on SQLite and PostgreSQL, both implementations side by
 * side; a repository takes its database's once, when it is made.
 */
interface MailboxWrites {
  /** The group insert: see {@link MailboxRepository.deliver}. */
  deliver(
    db: Kysely<Database>,
    messages: NewMessage[],
    day: string,
    trace?: NewDeliveryEvent[],
  ): Promise<Delivered>;
  /** Adds bytes served to a user's transfer count of `day` and its month. */
  countTransfer(db: Kysely<Database>, userId: string, day: string, bytes: number): Promise<void>;
  /** Writes down what a read handed out: see {@link MailboxRepository.handOut}. */
  handOut(db: Kysely<Database>, handed: HandOut): Promise<void>;
  /** Deletes one message as it is acknowledged: see {@link MailboxRepository.acknowledge}. */
  acknowledge(
    db: Kysely<Database>,
    address: string,
    uuid: string,
    tracedAt: number | undefined,
    event: LeavingEvent,
  ): Promise<boolean>;
}

/** The trace's name for a message leaving its mailbox acknowledged (`delivered`: by the proxy). */
type LeavingEvent = 'deleted' | 'delivered';

/** The trace's `polled` rows: the messages `uuids` of `address` handed out at `at`, as `by` asked. */
export interface PolledRows {
  address: string;
  uuids: string[];
  at: number;
  by: string;
}

/**
 * What one read of a mailbox handed to its reader, as it is written down: the bytes counted
 * as transferred, the trace's `polled` rows of the messages handed out, and the kept messages
 * the proxy is to forward no more (their agent has them).
 */
export interface HandOut {
  /** Whose transfer count the bytes go to, in `day` (UTC, `YYYY-MM-DD`) and its month. */
  owner: string;
  day: string;
  /** Bytes counted as transferred; 0 counts nothing. */
  bytes: number;
  polled?: PolledRows;
  /** Kept messages handed to their agent. */
  kept?: string[];
}

const sqliteWrites = (statements: CompiledStatements): MailboxWrites => ({
  deliver: (db, messages, day, trace) =>
    atomically(db, async (tx) => {
      const stored = await insertMessages(tx, statements, messages);
      const perOwner = await moveCounters(tx, statements, stored, 1);
      for (const [owner, count] of perOwner) {
        await addUsage(tx, statements, owner, day, { num_messages: count });
      }
      const traced =
        trace && trace.length > 0 ? await insertDeliveryEventsReturning(tx, trace) : [];
      return { ids: new Map(stored.map((message) => [message.uuid, message.id])), traced };
    }),

  countTransfer: (db, userId, day, bytes) =>
    addUsage(db, statements, userId, day, { bytes_transferred: bytes }),

  // One transaction: one commit of the log for all of it, where each part on its own was one
  // (the transfer count's two statements, two).
  handOut: (db, handed) =>
    atomically(db, async (tx) => {
      if (handed.bytes > 0) {
        await addUsage(tx, statements, handed.owner, handed.day, {
          bytes_transferred: handed.bytes,
        });
      }
      if (handed.polled) await recordPolls(tx, statements, handed.polled);
      if (handed.kept && handed.kept.length > 0) await stopForwarding(tx, handed.kept);
    }),

  acknowledge: (db, address, uuid, tracedAt, event) =>
    atomically(db, async (tx) => {
      const removed = await statements.first(tx, 'messages.acknowledge', [uuid, address], () =>
        tx
          .deleteFrom('messages')
          .where('uuid', '=', uuid)
          .where('address', '=', address)
          .returning([...LEAVING_KEPT, 'expires_at'])
          .compile(),
      );
      if (!removed) return false;
      await moveCounters(tx, statements, [removed], -1);
      const { expires_at } = removed;
      await statements.execute(tx, 'replays.keep', [uuid, expires_at], () =>
        tx
          .insertInto('replays')
          .values({ uuid, expires_at })
          .onConflict((oc) => oc.column('uuid').doNothing())
          .compile(),
      );
      if (tracedAt !== undefined) {
        await insertDeliveryEvents(tx, statements, leavingRows([removed], event, tracedAt));
      }
      return true;
    }),
});

/**
 * The first step of a PostgreSQL statement whose commit need not wait for the disk:
 * set_config(…, true) lasts until the end of the statement's own transaction.
 */
const UNFLUSHED = sql`unflushed as (select set_config('synchronous_commit', 'off', true) as setting)`;

/**
 * A transfer count's steps, in a `with` after {@link UNFLUSHED}: `bytes` added to the user's
 * month, then to its day (the day's insert reads what the month's wrote), the order every
 * writer of usage counts takes them, so two writers never wait on each other.
 */
function transferSteps(userId: string, day: string, bytes: number): RawBuilder<unknown> {
  return sql`by_month as (
      insert into usage_periods (user_id, period, num_messages, bytes_transferred)
      select ${userId}, ${day.slice(0, 7)}, 0, cast(${bytes} as bigint) from unflushed
      on conflict (user_id, period)
      do update set bytes_transferred = usage_periods.bytes_transferred + excluded.bytes_transferred
      returning user_id
    ), by_day as (
      insert into usage_days (user_id, day, num_messages, bytes_transferred)
      select user_id, ${day}, 0, cast(${bytes} as bigint) from by_month
      on conflict (user_id, day)
      do update set bytes_transferred = usage_days.bytes_transferred + excluded.bytes_transferred
    )`;
}

const postgresWrites = (statements: CompiledStatements): MailboxWrites => ({
  // One statement is atomic on its own and costs one round trip, where a transaction costs
  // one per statement and two more for its begin and commit. Every part sees the tables as
  // they were before the statement: `counted` hands the owners of the mailboxes it moved,
  // with what moved, to `owned` and `charged` through RETURNING.
  async deliver(db, messages, day, trace) {
    if (messages.length === 0) return { ids: new Map(), traced: [] };
    if (messages.length > MAX_ROWS_PER_INSERT) {
      throw new RangeError(`at most ${MAX_ROWS_PER_INSERT} messages per statement`);
    }
    // A message's sender and digest are stored for the delivery trace, when it is on; the
    // forward columns only for a group that holds a message the proxy kept.
    const traced = messages.some((m) => m.sender != null || m.digest != null);
    const kept = messages.some((m) => m.next_forward_at != null);
    const rows = () =>
      sql.join(
        messages.map((m) => {
          const values = [
            sql`${m.uuid}, ${m.address}, ${m.envelope}, ${m.size}, ${m.received_at}, ${m.expires_at}`,
            ...(traced ? [sql`${m.sender ?? null}, ${m.digest ?? null}`] : []),
            ...(kept ? [sql`${m.next_forward_at ?? null}, ${m.forward_attempts ?? 0}`] : []),
          ];
          return sql`(${sql.join(values)})`;
        }),
      );
    const columns = sql.raw(
      (traced ? ', sender, digest' : '') + (kept ? ', next_forward_at, forward_attempts' : ''),
    );
    const tracing = trace !== undefined && trace.length > 0;
    // Built only when its shape is new.
    const statement = () => sql<{ part: 'm' | 'd' } & DeliveryEventRow>`
      with stored as (
        insert into messages (uuid, address, envelope, size, received_at, expires_at${columns})
        values ${rows()}
        on conflict (uuid) do nothing
        returning id, uuid, address, size
      ), per_mailbox as (
        select address, count(*) as messages, sum(size) as bytes from stored group by address
      ), counted as (
        update mailboxes
        set pending_messages = mailboxes.pending_messages + per_mailbox.messages,
            bytes_stored = mailboxes.bytes_stored + per_mailbox.bytes
        from per_mailbox
        where mailboxes.address = per_mailbox.address
        returning mailboxes.user_id, per_mailbox.messages, per_mailbox.bytes
      ), owned as (
        insert into user_storage (user_id, bytes_stored)
        select user_id, sum(bytes) from counted group by user_id
        on conflict (user_id)
        do update set bytes_stored = user_storage.bytes_stored + excluded.bytes_stored
      ), charged as (
        insert into usage_periods (user_id, period, num_messages, bytes_transferred)
        select user_id, ${day.slice(0, 7)}, sum(messages), 0 from counted group by user_id
        on conflict (user_id, period)
        do update set num_messages = usage_periods.num_messages + excluded.num_messages
        returning user_id
      ), charged_day as (
        -- After the month's rows (it reads what that step wrote): every writer of usage counts
        -- takes the month's row before the day's, so that two of them never wait on each other.
        insert into usage_days (user_id, day, num_messages, bytes_transferred)
        select c.user_id, ${day}, sum(c.messages), 0
        from counted c join charged p on p.user_id = c.user_id group by c.user_id
        on conflict (user_id, day)
        do update set num_messages = usage_days.num_messages + excluded.num_messages
      )${tracing ? traceStatement(trace) : sql``}
      select 'm' as part, id, uuid${tracing ? TRACE_PART_NULLS : sql``} from stored
      ${tracing ? sql`union all select 'd' as part, id, uuid, ${TRACE_PART_COLUMNS} from traced` : sql``}`;
    const values = messages.flatMap((m) => [
      m.uuid,
      m.address,
      m.envelope,
      m.size,
      m.received_at,
      m.expires_at,
      ...(traced ? [m.sender ?? null, m.digest ?? null] : []),
      ...(kept ? [m.next_forward_at ?? null, m.forward_attempts ?? 0] : []),
    ]);
    values.push(day.slice(0, 7), day);
    if (tracing) {
      for (const e of trace) {
        values.push(
          e.address,
          e.event,
          e.at,
          e.uuid ?? null,
          e.digest ?? null,
          e.sender ?? null,
          e.size ?? null,
          e.detail ?? null,
        );
      }
    }
    const shape = `messages.deliver ${messages.length}${traced ? ' traced' : ''}${kept ? ' kept' : ''} ${tracing ? trace.length : 0}`;
    const result = await statements.execute(db, shape, values, () => statement().compile(db));
    const ids = new Map<string, number>();
    const written: DeliveryEventRow[] = [];
    for (const { part, ...row } of result.rows) {
      if (part === 'm') ids.set(row.uuid!, row.id);
      else written.push(row);
    }
    return { ids, traced: written };
  },

  // Every read of a mailbox counts its transfer, so the commit does not wait for the log to
  // reach the disk: a crash of the database server may forget the last fraction of a second
  // of transfer counts (never a message, and never a count of another kind), and a poll is
  // spared a disk flush.
  async countTransfer(db, userId, day, bytes) {
    const statement = () => sql`with ${UNFLUSHED}, ${transferSteps(userId, day, bytes)} select 1`;
    await statements.execute(
      db,
      'usage.transfer',
      [userId, day.slice(0, 7), bytes, day, bytes],
      () => statement().compile(db),
    );
  },

  // The transfer count, the trace's `polled` rows and the time noted on each message, in one
  // statement: one round trip before the poll answers, where in turn they took five (the count;
  // then begin, insert, update, commit). None of it is a message or a count that limits one
  // (the transfer quota's count, the trace), so the commit does not wait for the disk, as for
  // the transfer count alone. The uuids go as one array, so that any number of them runs the
  // same statement.
  async handOut(db, handed) {
    const { owner, day, bytes, polled, kept } = handed;
    if (polled === undefined || polled.uuids.length === 0) {
      if (bytes > 0) await this.countTransfer(db, owner, day, bytes);
    } else {
      const { address, uuids, at, by } = polled;
      const counted = bytes > 0;
      const statement = () => sql`
        with ${UNFLUSHED}${counted ? sql`, ${transferSteps(owner, day, bytes)}` : sql``}
        , traced as (
          insert into delivery_events (address, event, at, uuid, detail)
          select ${address}, 'polled', cast(${at} as bigint), polled.uuid, ${by}
          from unnest(cast(${uuids} as text[])) as polled (uuid) cross join unflushed
        )
        update messages set polled_at = cast(${at} as bigint)
        where uuid = any(cast(${uuids} as text[]))`;
      await statements.execute(
        db,
        `mailbox.hand-out${counted ? ' counted' : ''}`,
        [
          ...(counted ? [owner, day.slice(0, 7), bytes, day, bytes] : []),
          address,
          at,
          by,
          uuids,
          at,
          uuids,
        ],
        () => statement().compile(db),
      );
    }
    if (kept && kept.length > 0) await stopForwarding(db, kept);
  },

  // The delete, the counters, the owner's stored bytes, the kept uuid and the trace rows in one
  // statement: one round trip, where a transaction of them took seven (begin, five statements,
  // commit), and the client waits for this answer before its handler's own requests go out.
  // The rows are locked in the order the group insert takes them (the message, its mailbox, the
  // owner's total). Its commit waits for the disk: a forgotten acknowledgement would deliver the
  // message again.
  async acknowledge(db, address, uuid, tracedAt, event) {
    const traced = tracedAt !== undefined;
    const statement = () => sql<{ uuid: string }>`
      with removed as (
        delete from messages where uuid = ${uuid} and address = ${address}
        returning uuid, address, size, received_at, sender, digest, forward_attempts, expires_at
      ), counted as (
        update mailboxes
        set pending_messages = mailboxes.pending_messages - 1,
            bytes_stored = mailboxes.bytes_stored - removed.size
        from removed
        where mailboxes.address = removed.address
        returning mailboxes.user_id, removed.size
      ), owned as (
        insert into user_storage (user_id, bytes_stored)
        select user_id, -size from counted where size <> 0
        on conflict (user_id)
        do update set bytes_stored = user_storage.bytes_stored + excluded.bytes_stored
      ), kept as (
        insert into replays (uuid, expires_at)
        select uuid, expires_at from removed
        on conflict (uuid) do nothing
      )${
        traced
          ? sql`, traced as (
        insert into delivery_events (address, event, at, uuid, digest, sender, size, detail)
        select address, 'stored', received_at, uuid, digest, sender, size,
               case when forward_attempts > 0 then cast(${KEPT_DETAIL} as text) end
        from removed
        union all
        select address, cast(${event} as text), cast(${tracedAt} as bigint), uuid, digest, sender,
               size, cast(null as text)
        from removed
      )`
          : sql``
      }
      select uuid from removed`;
    const { rows } = await statements.execute(
      db,
      `mailbox.acknowledge${traced ? ' traced' : ''}`,
      [uuid, address, ...(traced ? [KEPT_DETAIL, event, tracedAt] : [])],
      () => statement().compile(db),
    );
    return rows.length > 0;
  },
});

/**
 * Records in the trace that the messages `uuids` of a mailbox were handed to its agent (`by`
 * says who asked) and notes the time on each, in one transaction.
 */
function recordPolls(
  db: Kysely<Database>,
  statements: CompiledStatements,
  polled: PolledRows,
): Promise<void> {
  const { address, uuids, at, by } = polled;
  return atomically(db, async (tx) => {
    const rows = uuids.map((uuid) => ({ address, uuid, event: 'polled', at, detail: by }));
    await insertDeliveryEvents(tx, statements, rows);
    for (const slice of slices(uuids)) {
      await statements.execute(tx, `messages.polled ${slice.length}`, [at, ...slice], () =>
        tx.updateTable('messages').set({ polled_at: at }).where('uuid', 'in', slice).compile(),
      );
    }
  });
}

/** See {@link MailboxRepository.stopForwarding}. */
async function stopForwarding(
  db: Kysely<Database>,
  uuids: string[],
  lease?: number,
): Promise<void> {
  await db
    .updateTable('messages')
    .set({ next_forward_at: null })
    .where('uuid', 'in', uuids)
    .where('next_forward_at', lease === undefined ? 'is not' : '=', lease ?? null)
    .execute();
}

/** The trace rows of a group insert on PostgreSQL, as one more step of its statement. */
function traceStatement(events: NewDeliveryEvent[]): RawBuilder<unknown> {
  const rows = events.map(
    (e) =>
      sql`(${e.address}, ${e.event}, cast(${e.at} as bigint), cast(${e.uuid ?? null} as text),
        cast(${e.digest ?? null} as text), cast(${e.sender ?? null} as text),
        cast(${e.size ?? null} as bigint), cast(${e.detail ?? null} as text))`,
  );
  return sql`, traced as (
        insert into delivery_events (address, event, at, uuid, digest, sender, size, detail)
        values ${sql.join(rows)}
        returning *
      )`;
}

/** The trace row's columns besides id and uuid, as the group insert answers them. */
const TRACE_PART_COLUMNS = sql`address, event, at, digest, sender, size, status_code, latency_ms,
  detail`;
/** The same columns, empty, beside a stored message's id and uuid. */
const TRACE_PART_NULLS = sql`, cast(null as text) as address, cast(null as text) as event,
  cast(null as bigint) as at, cast(null as text) as digest, cast(null as text) as sender,
  cast(null as bigint) as size, cast(null as integer) as status_code,
  cast(null as integer) as latency_ms, cast(null as text) as detail`;

/**
 * A registered agent's mailbox, the messages waiting in it, and what they count for: the
 * mailbox's counters, its owner's stored bytes and the owner's usage of the period. These
 * move together, in the same transaction (or statement) as the messages they count, so they
 * never drift from the messages table; nothing outside this repository adjusts them. Every
 * read hides expired messages, so expiry is exact even between two runs of the sweep.
 */
export class MailboxRepository {
  private readonly writes: MailboxWrites;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectName,
    /** The hot statements, compiled once per shape for this database. */
    private readonly statements: CompiledStatements,
  ) {
    this.writes = (dialect === 'sqlite' ? sqliteWrites : postgresWrites)(this.statements);
  }

  /** Creates the mailbox, empty, unless it exists. */
  async open(mailbox: Pick<MailboxRow, 'address' | 'user_id' | 'created_at'>): Promise<void> {
    await this.db
      .insertInto('mailboxes')
      .values({ ...mailbox, pending_messages: 0, bytes_stored: 0 })
      .onConflict((oc) => oc.column('address').doNothing())
      .execute();
  }

  /**
   * Removes the mailbox and, by cascade, every message in it, and takes its bytes off its
   * owner's total. False when there was none.
   */
  close(address: string): Promise<boolean> {
    return atomically(this.db, async (db) => {
      const removed = await db
        .deleteFrom('mailboxes')
        .where('address', '=', address)
        .returning(['user_id', 'bytes_stored'])
        .executeTakeFirst();
      if (!removed) return false;
      await addToOwnersStorage(
        db,
        this.statements,
        new Map([[removed.user_id, -Number(removed.bytes_stored)]]),
      );
      return true;
    });
  }

  find(address: string): Promise<MailboxRow | undefined> {
    return this.statements.first(this.db, 'mailboxes.find', [address], () =>
      this.db.selectFrom('mailboxes').selectAll().where('address', '=', address).compile(),
    );
  }

  /** The messages waiting in every mailbox, and the bytes they hold. */
  async totals(): Promise<{ messages: number; bytes: number }> {
    const row = await this.db
      .selectFrom('mailboxes')
      .select((eb) => [
        eb.fn.coalesce(eb.fn.sum<number>('pending_messages'), sql<number>`0`).as('messages'),
        eb.fn.coalesce(eb.fn.sum<number>('bytes_stored'), sql<number>`0`).as('bytes'),
      ])
      .executeTakeFirstOrThrow();
    return { messages: Number(row.messages), bytes: Number(row.bytes) };
  }

  /**
   * The mailbox and its owner's usage in `period`, stored bytes and quota overrides: what
   * every delivery and read checks, in one round trip instead of four.
   */
  async findWithOwnerUsage(
    address: string,
    period: string,
  ): Promise<MailboxWithOwnerUsage | undefined> {
    return (await this.findManyWithOwnerUsage([address], period)).get(address);
  }

  /** {@link findWithOwnerUsage} for several mailboxes at once, by address; missing ones are left out. */
  async findManyWithOwnerUsage(
    addresses: string[],
    period: string,
  ): Promise<Map<string, MailboxWithOwnerUsage>> {
    const { rows } = await this.statements.execute(
      this.db,
      `mailboxes.with_owner_usage ${addresses.length}`,
      [period, ...addresses],
      () =>
        this.db
          .selectFrom('mailboxes as m')
          .leftJoin('usage_periods as u', (join) =>
            join.onRef('u.user_id', '=', 'm.user_id').on('u.period', '=', period),
          )
          .leftJoin('user_quotas as q', 'q.user_id', 'm.user_id')
          .leftJoin('user_storage as s', 's.user_id', 'm.user_id')
          .selectAll('m')
          .select([
            'u.num_messages',
            'u.bytes_transferred',
            's.bytes_stored as owner_bytes_stored',
            'q.agents as quota_agents',
            'q.messages_per_month as quota_messages_per_month',
            'q.bytes_stored as quota_bytes_stored',
            'q.bytes_transferred_per_month as quota_bytes_transferred_per_month',
          ])
          .where((eb) =>
            addresses.length === 1
              ? eb('m.address', '=', addresses[0]!)
              : eb('m.address', 'in', addresses),
          )
          .compile(),
    );
    return new Map(
      rows.map((row) => [
        row.address,
        {
          mailbox: {
            address: row.address,
            user_id: row.user_id,
            pending_messages: Number(row.pending_messages),
            bytes_stored: Number(row.bytes_stored),
            created_at: row.created_at,
          },
          overrides: {
            agents: row.quota_agents,
            messages_per_month: row.quota_messages_per_month,
            bytes_stored: row.quota_bytes_stored,
            bytes_transferred_per_month: row.quota_bytes_transferred_per_month,
          },
          counters: {
            num_messages: Number(row.num_messages ?? 0),
            bytes_transferred: Number(row.bytes_transferred ?? 0),
          },
          ownerBytesStored: Number(row.owner_bytes_stored ?? 0),
        },
      ]),
    );
  }

  /**
   * Those of `uuids` that a stored message has, or that an acknowledged message had and
   * whose retention has not yet run out (a replay): one round trip for both.
   */
  async existing(uuids: string[]): Promise<Set<string>> {
    const { rows } = await this.statements.execute(
      this.db,
      `messages.existing ${uuids.length}`,
      [...uuids, ...uuids],
      () =>
        this.db
          .selectFrom('messages')
          .select('uuid')
          .where('uuid', 'in', uuids)
          .unionAll(this.db.selectFrom('replays').select('uuid').where('uuid', 'in', uuids))
          .compile(),
    );
    return new Set(rows.map((row) => row.uuid));
  }

  /**
   * Stores messages and moves, by exactly the messages stored, their mailboxes' counters,
   * their owners' stored bytes and their owners' message usage in `day` (UTC, `YYYY-MM-DD`) and
   * its month; all of it or
   * nothing. A message whose uuid is taken (stored before, or earlier in the list) is
   * skipped. Answers the uuids stored now, each with its row's id. Trace rows given
   * (refusals, resubmissions) are written in the same transaction, and answered as written.
   */
  deliver(messages: NewMessage[], day: string, trace?: NewDeliveryEvent[]): Promise<Delivered> {
    return this.writes.deliver(this.db, messages, day, trace);
  }

  /** Unexpired messages of a mailbox, oldest first. */
  async listPending(
    address: string,
    now: number,
    page: { limit: number; offset: number },
  ): Promise<PendingMessage[]> {
    const { rows } = await this.statements.execute(
      this.db,
      'messages.pending',
      [address, now, page.limit, page.offset],
      () =>
        this.db
          .selectFrom('messages')
          .select(PENDING)
          .where('address', '=', address)
          .where('expires_at', '>', now)
          .orderBy('id')
          .limit(page.limit)
          .offset(page.offset)
          .compile(),
    );
    return rows;
  }

  findPending(address: string, uuid: string, now: number): Promise<PendingMessage | undefined> {
    return this.db
      .selectFrom('messages')
      .select(PENDING)
      .where('uuid', '=', uuid)
      .where('address', '=', address)
      .where('expires_at', '>', now)
      .executeTakeFirst();
  }

  /**
   * Writes down what a read of a mailbox handed out (see {@link HandOut}): on SQLite in one
   * transaction, on PostgreSQL in one statement (the kept messages, seldom any, in one more).
   */
  handOut(handed: HandOut): Promise<void> {
    return this.writes.handOut(this.db, handed);
  }

  /** Counts `bytes` served to the owner's agents in `day` and its month (the transfer quota's). */
  countTransfer(userId: string, day: string, bytes: number): Promise<void> {
    return this.writes.countTransfer(this.db, userId, day, bytes);
  }

  /**
   * Deletes one message of a mailbox, as its agent acknowledges it (or the proxy delivered
   * it), with its counters, and keeps its uuid until the message would have expired, so that
   * the same envelope is not delivered again; false when there was none (or another request
   * deleted it first). With `tracedAt`, an `event` trace row (`deleted`, or `delivered` for
   * the proxy) is written with it: on SQLite in one transaction, on PostgreSQL in one statement.
   */
  acknowledge(
    address: string,
    uuid: string,
    tracedAt?: number,
    event: LeavingEvent = 'deleted',
  ): Promise<boolean> {
    return this.writes.acknowledge(this.db, address, uuid, tracedAt, event);
  }

  /**
   * Deletes every unexpired message of a mailbox, as its agent acknowledges them all, as
   * {@link acknowledge} does one (counters, kept uuids, trace rows with `tracedAt`); answers
   * how many went. An expired one is left to the sweep, which traces it as expired.
   */
  acknowledgeAll(address: string, now: number, tracedAt?: number): Promise<number> {
    return atomically(this.db, async (db) => {
      const removed = await db
        .deleteFrom('messages')
        .where('address', '=', address)
        .where('expires_at', '>', now)
        .returning([...LEAVING_KEPT, 'expires_at'])
        .execute();
      if (removed.length === 0) return 0;
      await moveCounters(db, this.statements, removed, -1);
      for (const slice of slices(removed)) {
        await db
          .insertInto('replays')
          .values(slice.map(({ uuid, expires_at }) => ({ uuid, expires_at })))
          .onConflict((oc) => oc.column('uuid').doNothing())
          .execute();
      }
      if (tracedAt !== undefined) {
        await insertDeliveryEvents(db, this.statements, leavingRows(removed, 'deleted', tracedAt));
      }
      return removed.length;
    });
  }

  /** Forgets up to `limit` uuids of acknowledged messages whose retention has run out. */
  async sweepReplays(now: number, limit: number): Promise<number> {
    const removed = await this.db
      .deleteFrom('replays')
      .where('uuid', 'in', (eb) =>
        eb.selectFrom('replays').select('uuid').where('expires_at', '<=', now).limit(limit),
      )
      .executeTakeFirst();
    return Number(removed.numDeletedRows);
  }

  /**
   * Deletes up to `limit` expired messages with their counters and says how many went.
   * RETURNING reports exactly the rows this statement removed, so a message deleted
   * concurrently by its reader is never subtracted from the counters twice. With `trace`, an
   * `expired` trace row for each is written in the same transaction, and answered with the
   * `stored` row it carries on.
   */
  sweep(
    now: number,
    limit: number,
    trace = false,
  ): Promise<{ removed: number; traced: DeliveryEventRow[] }> {
    return atomically(this.db, async (db) => {
      const removed = await db
        .deleteFrom('messages')
        .where('id', 'in', (eb) =>
          eb.selectFrom('messages').select('id').where('expires_at', '<=', now).limit(limit),
        )
        .returning([...LEAVING_KEPT, 'next_forward_at'])
        .execute();
      await moveCounters(db, this.statements, removed, -1);
      // A kept message still waiting for its forward counts in its agent's outage.
      const unforwarded = (m: LeavingMessage) =>
        m.next_forward_at == null ? null : EXPIRED_UNFORWARDED_DETAIL;
      const traced = trace
        ? await insertDeliveryEventsReturning(db, leavingRows(removed, 'expired', now, unforwarded))
        : [];
      return { removed: removed.length, traced };
    });
  }

  /**
   * Claims up to `limit` kept messages whose forward is due at `now` (unexpired), of agents
   * that are not in an outage, oldest due first, by moving their `next_forward_at` to `lease` in the claiming statement: no other
   * process claims them again before the lease ends (when an attempt that never reported, its
   * process gone, is due again). On PostgreSQL a message another transaction is claiming is
   * skipped rather than waited for, and one claimed meanwhile fails the condition again.
   */
  async claimForwards(now: number, lease: number, limit: number): Promise<ClaimedForward[]> {
    const rows = await this.db
      .updateTable('messages')
      .set({ next_forward_at: lease })
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('messages')
          .select('id')
          .where('next_forward_at', '<=', now)
          .where('expires_at', '>', now)
          // An agent in an outage is tried by one message at a time (claimProbes).
          .where(({ not, exists, selectFrom }) =>
            not(
              exists(
                selectFrom('forward_outages')
                  .select('forward_outages.address')
                  .whereRef('forward_outages.address', '=', 'messages.address'),
              ),
            ),
          )
          .orderBy('next_forward_at')
          .limit(limit)
          .$if(this.dialect === 'postgres', (select) => select.forUpdate().skipLocked()),
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
      .execute();
    return rows.map((row) => ({ ...row, url: row.url ?? null, lease }));
  }

  /**
   * After a failed forward of a message claimed until `lease`: counts the failure and makes
   * it due at `next`. A claim lost meanwhile (its agent was handed the message or deleted it,
   * or the lease ran out and another process claimed it) changes nothing.
   */
  async forwardAgainAt(uuid: string, lease: number, next: number): Promise<void> {
    await this.db
      .updateTable('messages')
      .set((eb) => ({ next_forward_at: next, forward_attempts: eb('forward_attempts', '+', 1) }))
      .where('uuid', '=', uuid)
      .where('next_forward_at', '=', lease)
      .execute();
  }

  /**
   * No forward of these messages is due any more; they stay in their mailbox for their agent.
   * With `lease`, only while the claim that ends then holds.
   */
  stopForwarding(uuids: string[], lease?: number): Promise<void> {
    return stopForwarding(this.db, uuids, lease);
  }

  /** The mailbox's quarantined messages, oldest first. */
  listQuarantined(
    address: string,
    page: { limit: number; offset: number },
  ): Promise<QuarantinedMessage[]> {
    return this.db
      .selectFrom('quarantined_messages')
      .select(['uuid', 'envelope', 'size', 'reason', 'received_at', 'expires_at', 'quarantined_at'])
      .where('address', '=', address)
      .orderBy('id')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
  }

  /** Deletes one quarantined message; false when there was none. */
  async deleteQuarantined(address: string, uuid: string): Promise<boolean> {
    const removed = await this.db
      .deleteFrom('quarantined_messages')
      .where('uuid', '=', uuid)
      .where('address', '=', address)
      .executeTakeFirst();
    return Number(removed.numDeletedRows) > 0;
  }

  /** Deletes up to `limit` expired quarantined messages and says how many went. */
  async sweepQuarantined(now: number, limit: number): Promise<number> {
    const removed = await this.db
      .deleteFrom('quarantined_messages')
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('quarantined_messages')
          .select('id')
          .where('expires_at', '<=', now)
          .limit(limit),
      )
      .executeTakeFirst();
    return Number(removed.numDeletedRows);
  }
}
