import { sql, type Insertable, type Kysely, type Selectable } from 'kysely';
import type { Database, StorageAssetPermissionsTable, StorageAssetsTable } from '../schema.js';
import { atomically } from '../statements.js';

export type StorageAssetRow = Selectable<StorageAssetsTable>;
export type NewStorageAssetRow = Insertable<StorageAssetsTable>;
export type StorageAssetPermissionRow = Selectable<StorageAssetPermissionsTable>;

/** What a change of contents writes to the metadata row. */
export interface ContentsChange {
  mime_type: string;
  size: number;
  checksum: string;
  uploaded_at: number;
  updated_at: number;
  file: string | null;
}

/** An asset gone: what its owner's total and the assets directory still need to hear. */
export interface RemovedAsset {
  id: string;
  user_id: string;
  size: number;
  file: string | null;
}

function numbers(row: StorageAssetRow): StorageAssetRow {
  return {
    ...row,
    size: Number(row.size),
    uploaded_at: row.uploaded_at === null ? null : Number(row.uploaded_at),
    expires_at: Number(row.expires_at),
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
  };
}

/**
 * Storage assets: metadata, contents kept in the database (a table of their own, read only
 * by a download), the agents each is shared with, and the bytes they add to their owner's
 * stored total (`user_storage`, which the mailboxes add to as well).
 */
export class StorageAssetsRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Adds the asset, with its contents when the database keeps them. */
  async insert(row: NewStorageAssetRow, contents: Uint8Array | undefined): Promise<void> {
    await atomically(this.db, async (db) => {
      await db.insertInto('storage_assets').values(row).execute();
      if (contents) {
        await db
          .insertInto('storage_asset_contents')
          .values({ asset_id: row.id, contents })
          .execute();
      }
    });
  }

  /** The user an agent is registered to; undefined when it is not registered. */
  async agentOwner(address: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('agents')
      .select('user_id')
      .where('address', '=', address)
      .executeTakeFirst();
    return row?.user_id;
  }

  /** The user who delegated the agent, if one did. */
  async delegatedBy(address: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('storage_delegations')
      .select('user_id')
      .where('agent_address', '=', address)
      .executeTakeFirst();
    return row?.user_id;
  }

  /** Delegates the agent to the user (the caller has ended any other delegation of it). */
  async delegate(address: string, userId: string, now: number): Promise<void> {
    await this.db
      .insertInto('storage_delegations')
      .values({ agent_address: address, user_id: userId, created_at: now })
      .execute();
  }

  /** Ends every delegation of the agent, whoever made it. */
  async endDelegations(address: string): Promise<void> {
    await this.db.deleteFrom('storage_delegations').where('agent_address', '=', address).execute();
  }

  /** False when the user had not delegated the agent. */
  async undelegate(address: string, userId: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('storage_delegations')
      .where('agent_address', '=', address)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** The agents the user delegated, oldest first (at most `limit`). */
  async delegations(userId: string, limit: number): Promise<string[]> {
    const rows = await this.db
      .selectFrom('storage_delegations')
      .select('agent_address')
      .where('user_id', '=', userId)
      .orderBy('created_at')
      .orderBy('agent_address')
      .limit(limit)
      .execute();
    return rows.map((row) => row.agent_address);
  }

  async countDelegations(userId: string): Promise<number> {
    const row = await this.db
      .selectFrom('storage_delegations')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('user_id', '=', userId)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  async find(id: string): Promise<StorageAssetRow | undefined> {
    const row = await this.db
      .selectFrom('storage_assets')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row && numbers(row);
  }

  /** The contents the database keeps for the asset; undefined when it keeps none. */
  async contents(id: string): Promise<Buffer | undefined> {
    const row = await this.db
      .selectFrom('storage_asset_contents')
      .select('contents')
      .where('asset_id', '=', id)
      .executeTakeFirst();
    return row ? Buffer.from(row.contents) : undefined;
  }

  /**
   * Replaces the asset's contents: in the database when `contents` is given, else the row
   * names the file that now holds them (and the database keeps none).
   */
  async replaceContents(
    id: string,
    change: ContentsChange,
    contents: Uint8Array | undefined,
  ): Promise<void> {
    await atomically(this.db, async (db) => {
      await db.updateTable('storage_assets').set(change).where('id', '=', id).execute();
      if (contents) {
        await db
          .insertInto('storage_asset_contents')
          .values({ asset_id: id, contents })
          .onConflict((oc) => oc.column('asset_id').doUpdateSet({ contents }))
          .execute();
      } else {
        await db.deleteFrom('storage_asset_contents').where('asset_id', '=', id).execute();
      }
    });
  }

  /** Deletes the asset (its contents and permissions by cascade); what it was, if it was. */
  async remove(id: string): Promise<RemovedAsset | undefined> {
    const row = await this.db
      .deleteFrom('storage_assets')
      .where('id', '=', id)
      .returning(['id', 'user_id', 'size', 'file'])
      .executeTakeFirst();
    return row && { ...row, size: Number(row.size) };
  }

  /** Up to `limit` assets that expired by `now`, deleted; what they were. */
  async removeExpired(now: number, limit: number): Promise<RemovedAsset[]> {
    return atomically(this.db, async (db) => {
      const due = await db
        .selectFrom('storage_assets')
        .select('id')
        .where('expires_at', '<=', now)
        .orderBy('expires_at')
        .limit(limit)
        .execute();
      if (due.length === 0) return [];
      const rows = await db
        .deleteFrom('storage_assets')
        .where(
          'id',
          'in',
          due.map((row) => row.id),
        )
        .returning(['id', 'user_id', 'size', 'file'])
        .execute();
      return rows.map((row) => ({ ...row, size: Number(row.size) }));
    });
  }

  /** The user's unexpired assets, newest first, and how many there are. */
  async listForUser(
    userId: string,
    now: number,
    limit: number,
    offset: number,
  ): Promise<{ rows: StorageAssetRow[]; total: number }> {
    const [rows, total] = await Promise.all([
      this.db
        .selectFrom('storage_assets')
        .selectAll()
        .where('user_id', '=', userId)
        .where('expires_at', '>', now)
        .orderBy('created_at', 'desc')
        .orderBy('id')
        .limit(limit)
        .offset(offset)
        .execute(),
      this.countForUser(userId, now),
    ]);
    return { rows: rows.map(numbers), total };
  }

  async countForUser(userId: string, now: number): Promise<number> {
    const row = await this.db
      .selectFrom('storage_assets')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('user_id', '=', userId)
      .where('expires_at', '>', now)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  findPermission(id: string, address: string): Promise<StorageAssetPermissionRow | undefined> {
    return this.db
      .selectFrom('storage_asset_permissions')
      .selectAll()
      .where('asset_id', '=', id)
      .where('agent_address', '=', address)
      .executeTakeFirst();
  }

  /** Sets what the agent may do with the asset, keeping when it was first granted. */
  async setPermission(row: StorageAssetPermissionRow): Promise<void> {
    await this.db
      .insertInto('storage_asset_permissions')
      .values(row)
      .onConflict((oc) =>
        oc
          .columns(['asset_id', 'agent_address'])
          .doUpdateSet({ can_read: row.can_read, can_write: row.can_write }),
      )
      .execute();
  }

  /** The asset's permissions (only the agent's, if one is named), oldest first, and their count. */
  async listPermissions(
    id: string,
    address: string | undefined,
    limit: number,
    offset: number,
  ): Promise<{ rows: StorageAssetPermissionRow[]; total: number }> {
    let query = this.db.selectFrom('storage_asset_permissions').where('asset_id', '=', id);
    if (address !== undefined) query = query.where('agent_address', '=', address);
    const [rows, count] = await Promise.all([
      query
        .selectAll()
        .orderBy('created_at')
        .orderBy('agent_address')
        .limit(limit)
        .offset(offset)
        .execute(),
      query.select((eb) => eb.fn.countAll<number>().as('count')).executeTakeFirstOrThrow(),
    ]);
    return { rows, total: Number(count.count) };
  }

  async countPermissions(id: string): Promise<number> {
    const row = await this.db
      .selectFrom('storage_asset_permissions')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('asset_id', '=', id)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /** Withdraws the agent's permission (every agent's when none is named); false when none was. */
  async removePermission(id: string, address: string | undefined): Promise<boolean> {
    let query = this.db.deleteFrom('storage_asset_permissions').where('asset_id', '=', id);
    if (address !== undefined) query = query.where('agent_address', '=', address);
    const result = await query.executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /**
   * Adds `bytes` to the user's stored total if it then stays within `limit`, in one statement
   * (two uploads at once cannot both pass); false when it would not. A negative change always
   * applies.
   */
  async addStored(userId: string, bytes: number, limit: number): Promise<boolean> {
    if (bytes === 0) return true;
    await this.db
      .insertInto('user_storage')
      .values({ user_id: userId, bytes_stored: 0 })
      .onConflict((oc) => oc.column('user_id').doNothing())
      .execute();
    let update = this.db
      .updateTable('user_storage')
      .set({ bytes_stored: sql`bytes_stored + ${bytes}` })
      .where('user_id', '=', userId);
    if (bytes > 0) update = update.where(sql<boolean>`bytes_stored + ${bytes} <= ${limit}`);
    const result = await update.executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Takes removed assets' bytes off their owners' totals. */
  async releaseStored(removed: RemovedAsset[]): Promise<void> {
    const byOwner = new Map<string, number>();
    for (const { user_id, size } of removed) {
      if (size > 0) byOwner.set(user_id, (byOwner.get(user_id) ?? 0) + size);
    }
    for (const [userId, bytes] of byOwner) {
      await this.db
        .updateTable('user_storage')
        .set({ bytes_stored: sql`bytes_stored - ${bytes}` })
        .where('user_id', '=', userId)
        .execute();
    }
  }

  /** The user's stored total (mailboxes and assets). */
  async stored(userId: string): Promise<number> {
    const row = await this.db
      .selectFrom('user_storage')
      .select('bytes_stored')
      .where('user_id', '=', userId)
      .executeTakeFirst();
    return Number(row?.bytes_stored ?? 0);
  }
}
