import { Type, type Static } from '@sinclair/typebox';
import {
  AgentAddress,
  BoundedInteger,
  MAX_OFFSET,
  Nullable,
  Timestamp,
  WireString,
} from './common.js';

/** The longest lifetime an asset may be given, in hours (the storage API's own bound). */
export const ASSET_LIFETIME_MAX_HOURS = 24;
/** Agents one asset may be shared with. */
export const ASSET_PERMISSIONS_MAX = 100;

const mimeType = WireString('mime-type', {
  maxLength: 255,
  description: 'MIME type of the contents, such as image/png',
});
const contents = WireString('base64', {
  description:
    'the contents, base64 (standard or URL-safe alphabet, padded or not); at most the service’s asset size limit once decoded',
});
const assetId = Type.String({ format: 'uuid', description: 'The id of an asset' });

export const AssetParams = Type.Object({ asset_id: assetId });

/** `POST /v1/storage/assets/`: an asset, with or without its contents. */
export const NewAssetRequest = Type.Object({
  lifetime_hours: Type.Integer({
    minimum: 1,
    maximum: ASSET_LIFETIME_MAX_HOURS,
    description: 'how long the asset is kept, in hours (1–24); it is then deleted',
  }),
  mime_type: Type.Optional(Nullable(mimeType)),
  contents: Type.Optional(Nullable(contents)),
  name: Type.Optional(Nullable(Type.String({ maxLength: 255 }))),
});
export type NewAssetRequest = Static<typeof NewAssetRequest>;

/** `PUT /v1/storage/assets/{asset_id}/contents/` as JSON. */
export const AssetContentRequest = Type.Object({
  mime_type: mimeType,
  contents,
});
export type AssetContentRequest = Static<typeof AssetContentRequest>;

const reference = Type.String({
  description: 'the URL the contents are downloaded from',
});
const protocol = Type.String({
  description: 'the asset as chat messages name it: agent-storage://<host>/<asset_id>',
});

export const Asset = Type.Object({
  asset_id: Type.String({ format: 'uuid' }),
  name: Nullable(Type.String()),
  mime_type: Nullable(Type.String()),
  size: Type.Integer({ description: 'bytes' }),
  checksum: Type.String({ description: 'hex SHA-256 of the contents' }),
  expires_at: Timestamp,
  created_at: Timestamp,
  updated_at: Timestamp,
  reference,
  protocol,
});
export type Asset = Static<typeof Asset>;

export const Pagination = Type.Object({
  offset: Type.Integer(),
  limit: Type.Integer(),
  total: Type.Integer(),
});

export const AssetsList = Type.Object({
  items: Type.Array(Asset, { description: 'newest first' }),
  pagination: Pagination,
});
export type AssetsList = Static<typeof AssetsList>;

export const PageQuery = Type.Object({
  offset: BoundedInteger({ maximum: MAX_OFFSET, default: 0 }),
  limit: Type.Integer({ minimum: 1, maximum: 500, default: 100 }),
});
export type PageQuery = Static<typeof PageQuery>;

export const UploadAssetResponse = Type.Object({
  asset_id: Type.String({ format: 'uuid' }),
  reference,
});
export type UploadAssetResponse = Static<typeof UploadAssetResponse>;

export const AssetDownload = Type.Object({
  asset_id: Type.String({ format: 'uuid' }),
  contents: Type.String({ description: 'standard padded base64' }),
  mime_type: Type.String(),
  expires_at: Timestamp,
  reference,
});
export type AssetDownload = Static<typeof AssetDownload>;

export const NewPermissionRequest = Type.Object({
  agent_address: AgentAddress,
  read: Type.Boolean(),
  write: Type.Boolean({ description: 'whether the agent may upload new contents' }),
});
export type NewPermissionRequest = Static<typeof NewPermissionRequest>;

export const Permission = Type.Object({
  agent_address: Type.String(),
  read: Type.Boolean(),
  write: Type.Boolean(),
});
export type Permission = Static<typeof Permission>;

export const PermissionList = Type.Object({
  items: Type.Array(Permission, { description: 'oldest first' }),
  pagination: Pagination,
});
export type PermissionList = Static<typeof PermissionList>;

export const PermissionsQuery = Type.Object({
  agent_address: Type.Optional(AgentAddress),
  ...PageQuery.properties,
});
export type PermissionsQuery = Static<typeof PermissionsQuery>;

export const PermissionDeleteQuery = Type.Object({
  agent_address: Type.Optional(
    WireString('agent-address', {
      maxLength: 66,
      description: 'the agent whose permission goes; absent: every agent’s',
    }),
  ),
});
export type PermissionDeleteQuery = Static<typeof PermissionDeleteQuery>;

export const DelegationParams = Type.Object({ agent_address: AgentAddress });

export const DelegationResponse = Type.Object({
  agent_address: Type.String(),
  owner: Type.String({ description: 'the id of the user who delegated the agent' }),
});
export type DelegationResponse = Static<typeof DelegationResponse>;

export const DelegationList = Type.Object({
  items: Type.Array(Type.String(), {
    description: 'the agents the caller delegated, oldest first',
  }),
});
export type DelegationList = Static<typeof DelegationList>;
