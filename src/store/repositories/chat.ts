import type { Insertable, Kysely, Selectable } from 'kysely';
import type { CompiledStatements } from '../compiled.js';
import type {
  ChatEntriesTable,
  ChatIdentitiesTable,
  ChatSessionsTable,
  Database,
} from '../schema.js';

export type ChatIdentityRow = Selectable<ChatIdentitiesTable>;
export type ChatSessionRow = Selectable<ChatSessionsTable>;
export type ChatEntryRow = Selectable<ChatEntriesTable>;
export type NewChatEntry = Insertable<ChatEntriesTable>;

/** Chat identities, sessions and what was said in them (docs/chat.md). */
export class ChatRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly statements: CompiledStatements,
  ) {}

  // ---- Identities ------------------------------------------------------------------------

  findIdentity(ownerId: string): Promise<ChatIdentityRow | undefined> {
    return this.db
      .selectFrom('chat_identities')
      .selectAll()
      .where('owner_id', '=', ownerId)
      .executeTakeFirst();
  }

  /**
   * Compiled once and kept prepared: the Almanac asks it the first time it meets an address it
   * does not hold (a chat identity resolves to this service's mailbox).
   */
  async findIdentityByAddress(address: string): Promise<ChatIdentityRow | undefined> {
    return this.statements.first(
      this.db,
      'chat_identities.by_address',
      [address],
      () =>
        this.db
          .selectFrom('chat_identities')
          .select(['owner_id', 'address', 'key_ciphertext', 'created_at'])
          .where('address', '=', address)
          .compile(),
      { prepared: true },
    );
  }

  /** Stores the owner's identity unless they have one already; answers the one that is kept. */
  async addIdentity(row: ChatIdentityRow): Promise<ChatIdentityRow> {
    await this.db
      .insertInto('chat_identities')
      .values(row)
      .onConflict((oc) => oc.column('owner_id').doNothing())
      .execute();
    return (await this.findIdentity(row.owner_id))!;
  }

  // ---- Sessions --------------------------------------------------------------------------

  async addSession(row: ChatSessionRow): Promise<void> {
    await this.db.insertInto('chat_sessions').values(row).execute();
  }

  findSession(id: string): Promise<ChatSessionRow | undefined> {
    return this.db.selectFrom('chat_sessions').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** The owner's sessions, the most recently active first (with one agent's alone, if named). */
  listSessions(
    ownerId: string,
    page: { limit: number; offset: number; agent?: string },
  ): Promise<ChatSessionRow[]> {
    let query = this.db
      .selectFrom('chat_sessions')
      .selectAll()
      .where('owner_id', '=', ownerId)
      .orderBy('updated_at', 'desc')
      .orderBy('id')
      .limit(page.limit)
      .offset(page.offset);
    if (page.agent !== undefined) query = query.where('agent', '=', page.agent);
    return query.execute();
  }

  async touchSession(id: string, at: number): Promise<void> {
    await this.db
      .updateTable('chat_sessions')
      .set({ updated_at: at })
      .where('id', '=', id)
      .execute();
  }

  /** Ends the session; false when it had ended already. */
  async endSession(id: string, at: number): Promise<boolean> {
    const result = await this.db
      .updateTable('chat_sessions')
      .set({ ended_at: at, updated_at: at })
      .where('id', '=', id)
      .where('ended_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  // ---- Entries ---------------------------------------------------------------------------

  /** Adds entries, in order; answers them as stored (with their ids). */
  async addEntries(rows: NewChatEntry[]): Promise<ChatEntryRow[]> {
    if (rows.length === 0) return [];
    return this.db.insertInto('chat_entries').values(rows).returningAll().execute();
  }

  /** A session's entries after `after` (an entry id), oldest first. */
  entries(sessionId: string, after: number, limit: number): Promise<ChatEntryRow[]> {
    return this.db
      .selectFrom('chat_entries')
      .selectAll()
      .where('session_id', '=', sessionId)
      .where('id', '>', after)
      .orderBy('id')
      .limit(limit)
      .execute();
  }

  /** The message `msgId` the owner sent in the session, when there is one. */
  sentMessage(sessionId: string, msgId: string): Promise<ChatEntryRow | undefined> {
    return this.db
      .selectFrom('chat_entries')
      .selectAll()
      .where('session_id', '=', sessionId)
      .where('msg_id', '=', msgId)
      .where('direction', '=', 'out')
      .where('kind', '=', 'message')
      .executeTakeFirst();
  }

  /** Whether the session holds an entry of this direction and kind about the message `msgId`. */
  async hasEntry(
    sessionId: string,
    direction: 'out' | 'in',
    kind: 'message' | 'acknowledgement',
    msgId: string,
  ): Promise<boolean> {
    const row = await this.db
      .selectFrom('chat_entries')
      .select('id')
      .where('session_id', '=', sessionId)
      .where('msg_id', '=', msgId)
      .where('direction', '=', direction)
      .where('kind', '=', kind)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** When the agent acknowledged the message `msgId` of the session, if it did. */
  async acknowledgedAt(sessionId: string, msgId: string): Promise<number | undefined> {
    const row = await this.db
      .selectFrom('chat_entries')
      .select('at')
      .where('session_id', '=', sessionId)
      .where('msg_id', '=', msgId)
      .where('direction', '=', 'in')
      .where('kind', '=', 'acknowledgement')
      .orderBy('id')
      .limit(1)
      .executeTakeFirst();
    return row === undefined ? undefined : Number(row.at);
  }

  /** Whether anything was said to the agent in the session yet. */
  async hasAnyOutgoing(sessionId: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('chat_entries')
      .select('id')
      .where('session_id', '=', sessionId)
      .where('direction', '=', 'out')
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }
}
