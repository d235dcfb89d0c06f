import type { AssetInfo, AssetPage, AssetPermission } from '../services/storage-assets.js';
import { isoTimestamp } from '../wire/common.js';
import type {
  Asset,
  AssetDownload,
  AssetsList,
  Permission,
  PermissionList,
  UploadAssetResponse,
} from '../wire/storage-assets.js';

/** What a download says of contents whose type was never given. */
const UNKNOWN_TYPE = 'application/octet-stream';

export function assetView(asset: AssetInfo): Asset {
  return {
    asset_id: asset.id,
    name: asset.name,
    mime_type: asset.mimeType,
    size: asset.size,
    checksum: asset.checksum,
    expires_at: isoTimestamp(asset.expiresAt),
    created_at: isoTimestamp(asset.createdAt),
    updated_at: isoTimestamp(asset.updatedAt),
    reference: asset.reference,
    protocol: asset.uri,
  };
}

export function assetsListView(page: AssetPage<AssetInfo>): AssetsList {
  return {
    items: page.items.map(assetView),
    pagination: { offset: page.offset, limit: page.limit, total: page.total },
  };
}

export function uploadView(asset: AssetInfo): UploadAssetResponse {
  return { asset_id: asset.id, reference: asset.reference };
}

export function downloadView(asset: AssetInfo, contents: Buffer): AssetDownload {
  return {
    asset_id: asset.id,
    contents: contents.toString('base64'),
    mime_type: asset.mimeType ?? UNKNOWN_TYPE,
    expires_at: isoTimestamp(asset.expiresAt),
    reference: asset.reference,
  };
}

/** The Content-Type of contents sent as they are. */
export function rawTypeOf(asset: AssetInfo): string {
  return asset.mimeType ?? UNKNOWN_TYPE;
}

export function permissionView(permission: AssetPermission): Permission {
  return {
    agent_address: permission.agentAddress,
    read: permission.read,
    write: permission.write,
  };
}

export function permissionListView(page: AssetPage<AssetPermission>): PermissionList {
  return {
    items: page.items.map(permissionView),
    pagination: { offset: page.offset, limit: page.limit, total: page.total },
  };
}
