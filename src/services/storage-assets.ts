import { randomUUID } from 'node:crypto';
import { sha256Hex } from '../crypto/index.js';
import {
  ConflictError,
  ForbiddenError,
  NotFoundError,
  PayloadTooLargeError,
  QuotaExceededError,
} from '../errors.js';
import type { AssetFiles } from '../infra/asset-files.js';
import type { Clock } from '../infra/clock.js';
import type { Logger } from '../logger.js';
import type { Repositories, Store } from '../store/index.js';
import type {
  RemovedAsset,
  StorageAssetPermissionRow,
  StorageAssetRow,
} from '../store/repositories/storage-assets.js';
import { ASSET_PERMISSIONS_MAX } from '../wire/storage-assets.js';
import type { UsageService } from './usage.js';

/** Unexpired assets one user may hold at once, whatever their size. */
export const MAX_ASSETS_PER_USER = 10_000;
/** Agents one user may delegate. */
export const MAX_DELEGATIONS_PER_USER = 1000;
/** Expired assets one sweep deletes per statement, and the batches it goes on for. */
const SWEEP_BATCH = 200;
const SWEEP_MAX_BATCHES = 50;
const HOUR_MS = 3_600_000;

/** Who calls: a user (API key or console session), or an agent (its attestation). */
export type AssetCaller = { kind: 'user'; userId: string } | { kind: 'agent'; address: string };

/** An asset as the storage API shows it. */
export interface AssetInfo {
  id: string;
  name: string | null;
  mimeType: string | null;
  size: number;
  checksum: string;
  expiresAt: number;
  createdAt: number;
  updatedAt: number;
  /** Where its contents are downloaded from. */
  reference: string;
  /** `agent-storage://<host>/<id>`: how chat messages name it. */
  uri: string;
}

export interface AssetPermission {
  agentAddress: string;
  read: boolean;
  write: boolean;
}

export interface AssetPage<T> {
  items: T[];
  offset: number;
  limit: number;
  total: number;
}

export interface StorageAssetsPolicy {
  /** The largest contents one asset may hold, in bytes. */
  maxBytes: number;
  /** The service's public URL: references and `agent-storage://` URIs derive from it. */
  publicUrl: string;
}

/** What a caller may do with an asset. */
interface Access {
  read: boolean;
  write: boolean;
  /** Share it, list and withdraw its permissions, delete it: its owner and its uploader. */
  manage: boolean;
}

const EMPTY_CHECKSUM = sha256Hex('');

/**
 * Storage assets (docs/storage.md): files users and agents hand to other agents, named in
 * chat messages as `agent-storage://<host>/<id>`. An asset belongs to a user: the caller's
 * own, or, when an agent creates it, the user the agent is registered to. Its bytes count in
 * that user's storage quota, beside the bytes their mailboxes hold. It may be read by its
 * owner, by the agent that created it and by the agents it is shared with; to anyone else it
 * does not exist (404). It lives for the hours it was given (at most 24) and is then swept.
 * Contents are kept in the database, or in a directory when one is configured.
 */
export class StorageAssetsService {
  private readonly storageHost: string;

  constructor(
    private readonly store: Store,
    private readonly usage: UsageService,
    private readonly clock: Clock,
    private readonly policy: StorageAssetsPolicy,
    private readonly logger: Logger,
    /** Where contents are kept when not in the database. */
    private readonly files?: AssetFiles,
  ) {
    const url = new URL(policy.publicUrl);
    this.storageHost = `${url.host}${url.pathname}`.replace(/\/+$/, '');
  }

  /** The largest contents one asset may hold. */
  get maxBytes(): number {
    return this.policy.maxBytes;
  }

  /**
   * Makes an asset, with its contents if given. An agent's asset belongs to the user it is
   * registered to; an agent registered to nobody has no storage to use (403).
   */
  async create(
    caller: AssetCaller,
    fields: {
      lifetimeHours: number;
      name?: string | null;
      mimeType?: string | null;
      contents?: Buffer | null;
    },
  ): Promise<AssetInfo> {
    const owner = await this.ownerFor(caller);
    const contents = fields.contents ?? undefined;
    if (contents) this.checkSize(contents.length);
    const now = this.clock.now();
    const id = randomUUID();
    const size = contents?.length ?? 0;
    const row: StorageAssetRow = {
      id,
      user_id: owner,
      agent_address: caller.kind === 'agent' ? caller.address : null,
      name: fields.name ?? null,
      mime_type: fields.mimeType ?? null,
      size,
      checksum: contents ? sha256Hex(contents) : EMPTY_CHECKSUM,
      uploaded_at: contents ? now : null,
      file: null,
      expires_at: now + fields.lifetimeHours * HOUR_MS,
      created_at: now,
      updated_at: now,
    };
    if (contents && this.files) row.file = await this.files.write(id, contents);
    try {
      await this.store.transaction(async (tx) => {
        // Two assets made at once must not both pass the count: the owner's row is locked.
        await tx.users.lock(owner);
        if ((await tx.storageAssets.countForUser(owner, now)) >= MAX_ASSETS_PER_USER) {
          throw new ConflictError(
            `A user may hold at most ${MAX_ASSETS_PER_USER} assets at once; delete some or wait for them to expire`,
          );
        }
        await this.reserve(tx, owner, size);
        await tx.storageAssets.insert(row, row.file === null ? contents : undefined);
      });
    } catch (err) {
      if (row.file !== null) await this.removeFile(row.file);
      throw err;
    }
    this.logger.debug({ asset: id, size }, 'asset created');
    return this.infoOf(row);
  }

  /** Replaces an asset's contents: its owner, its uploader and agents allowed to write it. */
  async upload(
    caller: AssetCaller,
    id: string,
    fields: { mimeType: string; contents: Buffer },
  ): Promise<AssetInfo> {
    const asset = await this.accessible(caller, id, 'write');
    const { contents } = fields;
    this.checkSize(contents.length);
    const now = this.clock.now();
    const file = this.files ? await this.files.write(id, contents) : null;
    let previous: StorageAssetRow | undefined;
    try {
      previous = await this.store.transaction(async (tx) => {
        // Two uploads at once must each move the total by what they replace.
        await tx.users.lock(asset.user_id);
        const current = await tx.storageAssets.find(id);
        if (!current || current.expires_at <= now) throw this.notFound(id);
        await this.reserve(tx, current.user_id, contents.length - current.size);
        await tx.storageAssets.replaceContents(
          id,
          {
            mime_type: fields.mimeType,
            size: contents.length,
            checksum: sha256Hex(contents),
            uploaded_at: now,
            updated_at: now,
            file,
          },
          file === null ? contents : undefined,
        );
        return current;
      });
    } catch (err) {
      if (file !== null) await this.removeFile(file);
      throw err;
    }
    if (previous.file !== null) await this.removeFile(previous.file);
    return this.infoOf({
      ...previous,
      mime_type: fields.mimeType,
      size: contents.length,
      checksum: sha256Hex(contents),
      updated_at: now,
    });
  }

  /** The asset's metadata, for anyone who may read it. */
  async get(caller: AssetCaller, id: string): Promise<AssetInfo> {
    return this.infoOf(await this.accessible(caller, id, 'read'));
  }

  /** The asset and its contents, for anyone who may read it; 404 while it has none. */
  async download(caller: AssetCaller, id: string): Promise<{ asset: AssetInfo; contents: Buffer }> {
    const asset = await this.accessible(caller, id, 'read');
    if (asset.uploaded_at === null) {
      throw new NotFoundError(
        `Asset ${id} has no contents yet; upload them with PUT /v1/storage/assets/${id}/contents/`,
      );
    }
    const contents =
      asset.file !== null
        ? await this.files?.read(asset.file)
        : await this.store.repos.storageAssets.contents(id);
    if (!contents) {
      this.logger.error({ asset: id, file: asset.file }, 'asset contents are missing');
      throw new NotFoundError(`The contents of asset ${id} are missing from the service's storage`);
    }
    return { asset: this.infoOf(asset), contents };
  }

  /** The user's unexpired assets, newest first. */
  async list(
    userId: string,
    page: { offset: number; limit: number },
  ): Promise<AssetPage<AssetInfo>> {
    const { rows, total } = await this.store.repos.storageAssets.listForUser(
      userId,
      this.clock.now(),
      page.limit,
      page.offset,
    );
    return { items: rows.map((row) => this.infoOf(row)), total, ...page };
  }

  /** Deletes the asset, its contents and its permissions: its owner or its uploader. */
  async remove(caller: AssetCaller, id: string): Promise<void> {
    await this.accessible(caller, id, 'manage');
    const removed = await this.store.transaction(async (tx) => {
      const gone = await tx.storageAssets.remove(id);
      if (gone) await tx.storageAssets.releaseStored([gone]);
      return gone;
    });
    if (!removed) throw this.notFound(id);
    if (removed.file !== null) await this.removeFile(removed.file);
  }

  /** Shares the asset with an agent (or changes what it may do): its owner or its uploader. */
  async setPermission(
    caller: AssetCaller,
    id: string,
    permission: AssetPermission,
  ): Promise<AssetPermission> {
    await this.accessible(caller, id, 'manage');
    await this.store.transaction(async (tx) => {
      const existing = await tx.storageAssets.findPermission(id, permission.agentAddress);
      if (!existing && (await tx.storageAssets.countPermissions(id)) >= ASSET_PERMISSIONS_MAX) {
        throw new ConflictError(
          `An asset may be shared with at most ${ASSET_PERMISSIONS_MAX} agents; withdraw a permission first`,
        );
      }
      await tx.storageAssets.setPermission({
        asset_id: id,
        agent_address: permission.agentAddress,
        can_read: Number(permission.read),
        can_write: Number(permission.write),
        created_at: existing?.created_at ?? this.clock.now(),
      });
    });
    return permission;
  }

  /** The agents the asset is shared with (or the one named): its owner or its uploader. */
  async permissions(
    caller: AssetCaller,
    id: string,
    query: { agentAddress?: string; offset: number; limit: number },
  ): Promise<AssetPage<AssetPermission>> {
    await this.accessible(caller, id, 'manage');
    const { rows, total } = await this.store.repos.storageAssets.listPermissions(
      id,
      query.agentAddress,
      query.limit,
      query.offset,
    );
    return { items: rows.map(permissionOf), total, offset: query.offset, limit: query.limit };
  }

  /**
   * Withdraws an agent's permission, or every agent's when none is named: the asset's owner or
   * its uploader.
   */
  async removePermission(
    caller: AssetCaller,
    id: string,
    agentAddress: string | undefined,
  ): Promise<void> {
    await this.accessible(caller, id, 'manage');
    const removed = await this.store.repos.storageAssets.removePermission(id, agentAddress);
    if (!removed && agentAddress !== undefined) {
      throw new NotFoundError(`Asset ${id} is not shared with agent ${agentAddress}`);
    }
  }

  /**
   * Lets an agent create assets in the user's storage. The user must hold the agent's identity:
   * have proved control of its key (`POST /v2/identity`, which registering it also needs), so
   * that nobody delegates an agent that is not theirs. One user at a time holds an identity, so
   * one user delegates an agent; the delegation ends when the agent's registration is deleted
   * (docs/storage.md, "Who may do what"). An agent registered to a user uses that user's
   * storage whatever its delegation says.
   */
  async delegate(userId: string, agentAddress: string): Promise<void> {
    await this.store.transaction(async (tx) => {
      await tx.users.lock(userId);
      const identity = await tx.identities.find(agentAddress);
      if (identity?.user_id !== userId) {
        throw new ForbiddenError(
          `Prove that agent ${agentAddress} is yours before delegating it: GET /v2/identity/${agentAddress}/challenge, then POST /v2/identity with the challenge signed by the agent's key (registering the agent does this)`,
        );
      }
      const current = await tx.storageAssets.delegatedBy(agentAddress);
      if (current === userId) return;
      if ((await tx.storageAssets.countDelegations(userId)) >= MAX_DELEGATIONS_PER_USER) {
        throw new ConflictError(
          `A user may delegate at most ${MAX_DELEGATIONS_PER_USER} agents; withdraw a delegation first`,
        );
      }
      // Another user's delegation is from before the identity changed hands: it went with it.
      await tx.storageAssets.endDelegations(agentAddress);
      await tx.storageAssets.delegate(agentAddress, userId, this.clock.now());
    });
  }

  /** Withdraws the user's delegation of the agent; 404 when there was none. */
  async undelegate(userId: string, agentAddress: string): Promise<void> {
    if (!(await this.store.repos.storageAssets.undelegate(agentAddress, userId))) {
      throw new NotFoundError(`You have not delegated agent ${agentAddress}`);
    }
  }

  /** The agents the user delegated, oldest first. */
  delegations(userId: string): Promise<string[]> {
    return this.store.repos.storageAssets.delegations(userId, MAX_DELEGATIONS_PER_USER);
  }

  /** Deletes expired assets a batch at a time and frees their bytes; how many went. */
  async sweepExpired(): Promise<number> {
    let swept = 0;
    for (let batch = 0; batch < SWEEP_MAX_BATCHES; batch++) {
      const now = this.clock.now();
      const removed: RemovedAsset[] = await this.store.transaction(async (tx) => {
        const gone = await tx.storageAssets.removeExpired(now, SWEEP_BATCH);
        await tx.storageAssets.releaseStored(gone);
        return gone;
      });
      for (const { file } of removed) if (file !== null) await this.removeFile(file);
      swept += removed.length;
      if (removed.length < SWEEP_BATCH) break;
    }
    if (swept > 0) this.logger.debug({ swept }, 'expired assets deleted');
    return swept;
  }

  // ---- Rules --------------------------------------------------------------------------------

  private async ownerFor(caller: AssetCaller): Promise<string> {
    if (caller.kind === 'user') return caller.userId;
    const repo = this.store.repos.storageAssets;
    const owner =
      (await repo.agentOwner(caller.address)) ?? (await repo.delegatedBy(caller.address));
    if (owner === undefined) {
      throw new ForbiddenError(
        `Agent ${caller.address} is not registered with this service, nor delegated by a user, so it has no storage to use: register it under a user or delegate it (PUT /v1/storage/assets/delegations/${caller.address}) (its assets then count in that user's storage quota), or create the asset with the user's API key`,
      );
    }
    return owner;
  }

  /** The unexpired asset if the caller may do `need` with it: 404 if it may do nothing, 403 if not that. */
  private async accessible(
    caller: AssetCaller,
    id: string,
    need: keyof Access,
  ): Promise<StorageAssetRow> {
    const asset = await this.store.repos.storageAssets.find(id);
    if (!asset || asset.expires_at <= this.clock.now()) throw this.notFound(id);
    const access = await this.accessOf(caller, asset);
    if (!access.read && !access.write && !access.manage) throw this.notFound(id);
    if (!access[need]) {
      const what = {
        read: 'read',
        write: 'upload contents to',
        manage: 'share or delete',
      }[need];
      throw new ForbiddenError(
        `This agent may not ${what} asset ${id}: ${
          need === 'manage'
            ? 'only its owner and the agent that created it may'
            : 'its owner has not given it that permission'
        }`,
      );
    }
    return asset;
  }

  private async accessOf(caller: AssetCaller, asset: StorageAssetRow): Promise<Access> {
    if (caller.kind === 'user') {
      const own = caller.userId === asset.user_id;
      return { read: own, write: own, manage: own };
    }
    if (caller.address === asset.agent_address) return { read: true, write: true, manage: true };
    const granted = await this.store.repos.storageAssets.findPermission(asset.id, caller.address);
    return {
      read: granted?.can_read === 1,
      write: granted?.can_write === 1,
      manage: false,
    };
  }

  private notFound(id: string): NotFoundError {
    return new NotFoundError(
      `No asset ${id}: it does not exist, has expired or was deleted, or is not shared with the caller`,
    );
  }

  private checkSize(bytes: number): void {
    if (bytes > this.policy.maxBytes) {
      throw new PayloadTooLargeError(
        `Asset contents are ${bytes} bytes; this service takes at most ${this.policy.maxBytes} bytes per asset (AGENTRY_ASSET_MAX_BYTES)`,
      );
    }
  }

  /** Adds `bytes` (negative to free them) to the owner's stored total, within their quota. */
  private async reserve(tx: Repositories, owner: string, bytes: number): Promise<void> {
    if (bytes <= 0) {
      await tx.storageAssets.addStored(owner, bytes, Number.MAX_SAFE_INTEGER);
      return;
    }
    const { bytesStored } = await this.usage.limitsFor(owner, tx);
    if (!(await tx.storageAssets.addStored(owner, bytes, bytesStored))) {
      const stored = await tx.storageAssets.stored(owner);
      throw new QuotaExceededError(
        `Storage quota reached ${stored} / ${bytesStored}: the asset needs ${bytes} bytes more; delete assets (or let them expire) or mailbox messages first`,
      );
    }
  }

  private async removeFile(file: string): Promise<void> {
    try {
      await this.files?.remove(file);
    } catch (err) {
      this.logger.warn({ err, file }, 'asset file not removed');
    }
  }

  private infoOf(row: StorageAssetRow): AssetInfo {
    return {
      id: row.id,
      name: row.name,
      mimeType: row.mime_type,
      size: row.size,
      checksum: row.checksum,
      expiresAt: row.expires_at,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      reference: `${this.policy.publicUrl}/v1/storage/assets/${row.id}/contents/`,
      uri: `agent-storage://${this.storageHost}/${row.id}`,
    };
  }
}

function permissionOf(row: StorageAssetPermissionRow): AssetPermission {
  return {
    agentAddress: row.agent_address,
    read: row.can_read === 1,
    write: row.can_write === 1,
  };
}
