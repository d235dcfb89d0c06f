import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { agentInPath } from '../../auth/principal.js';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../../context.js';
import type { Principal } from '../../auth/principal.js';
import { RequestValidationError, UnauthenticatedError } from '../../errors.js';
import type { AssetCaller, AssetInfo } from '../../services/storage-assets.js';
import { bodyChecker } from '../../wire/check.js';
import { errorResponses } from '../../wire/common.js';
import { isMimeType } from '../../wire/formats.js';
import {
  Asset,
  AssetContentRequest,
  AssetDownload,
  AssetParams,
  AssetsList,
  DelegationList,
  DelegationParams,
  DelegationResponse,
  NewAssetRequest,
  PageQuery,
  Permission,
  PermissionDeleteQuery,
  PermissionList,
  PermissionsQuery,
  NewPermissionRequest,
  UploadAssetResponse,
} from '../../wire/storage-assets.js';
import { userOf } from '../plugins/auth.js';
import { parseJsonBody } from '../plugins/errors.js';
import {
  assetsListView,
  assetView,
  downloadView,
  permissionListView,
  permissionView,
  rawTypeOf,
  uploadView,
} from '../../views/storage-assets.js';

/** The caller of a storage route: its user, or the agent whose attestation it sent. */
function callerOf(principal: Principal): AssetCaller {
  if (principal.kind === 'user') return { kind: 'user', userId: principal.userId };
  if (principal.kind === 'agent') return { kind: 'agent', address: principal.address };
  throw new UnauthenticatedError();
}

const checkContent = bodyChecker(AssetContentRequest);

/**
 * An asset's contents as they are, with its MIME type: whatever was uploaded, a browser that
 * opens it runs nothing of it on this origin (sandboxed) nor takes it for another type.
 */
function sendRaw(reply: FastifyReply, asset: AssetInfo, contents: Buffer | Uint8Array) {
  return reply
    .type(rawTypeOf(asset))
    .header('content-security-policy', 'sandbox')
    .header('x-content-type-options', 'nosniff')
    .send(contents as never);
}

/** Whether the client asked for the contents as they are rather than as JSON. */
function wantsRaw(request: FastifyRequest): boolean {
  const accept = request.headers.accept;
  return accept !== undefined && accept !== '' && !/json|\*\/\*/i.test(accept);
}

/**
 * Storage assets (docs/storage.md), as uAgents' `ExternalStorage` and the Agentverse SDK call
 * them: paths end with a slash, as theirs do. Contents travel as base64 in JSON; an upload may
 * also send them as they are, with the asset's MIME type as its Content-Type, and a download
 * that asks for a type other than JSON gets them as they are.
 */
export async function storageAssetsRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const assets = ctx.services.storageAssets;
  // Room for the base64 of the largest asset, and the JSON around it.
  const bodyLimit = Math.ceil(assets.maxBytes / 3) * 4 + 64 * 1024;

  r.put(
    '/v1/storage/assets/delegations/:agent_address',
    {
      config: { auth: 'user', about: agentInPath('agent_address') },
      schema: {
        tags: ['storage'],
        summary: 'Upsert Delegation',
        description:
          'Lets an agent create assets that count in the caller’s storage (an agent registered to a user always uses that user’s). The caller must hold the agent’s identity, proved with its key (`POST /v2/identity`; registering the agent proves it too): 403 otherwise. The delegation ends when the agent’s registration is deleted.',
        params: DelegationParams,
        response: { 200: DelegationResponse, ...errorResponses(401, 403, 409, 422) },
      },
    },
    async (request) => {
      const userId = userOf(request);
      await assets.delegate(userId, request.params.agent_address);
      return { agent_address: request.params.agent_address, owner: userId };
    },
  );

  r.delete(
    '/v1/storage/assets/delegations/:agent_address',
    {
      config: { auth: 'user', about: agentInPath('agent_address') },
      schema: {
        tags: ['storage'],
        summary: 'Delete Delegation',
        description:
          'Withdraws the caller’s delegation of the agent; the assets it made stay the caller’s.',
        params: DelegationParams,
        response: { 204: Type.Null(), ...errorResponses(401, 404, 422) },
      },
    },
    async (request, reply) => {
      await assets.undelegate(userOf(request), request.params.agent_address);
      return reply.code(204).send(null);
    },
  );

  r.get(
    '/v1/storage/assets/delegations/',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['storage'],
        summary: 'List Delegations',
        description: 'The agents the caller delegated, oldest first.',
        response: { 200: DelegationList, ...errorResponses(401) },
      },
    },
    async (request) => ({ items: await assets.delegations(userOf(request)) }),
  );

  r.post(
    '/v1/storage/assets/',
    {
      config: { auth: 'user-or-any-agent' },
      bodyLimit,
      schema: {
        tags: ['storage'],
        summary: 'Create Asset',
        description:
          'Makes an asset, with its contents (base64) or without them (upload them later). With a user API key it is the user’s; with an agent’s attestation it belongs to the user the agent is registered to (an agent registered to no one: 403), and the agent may read, share and delete it too. Its bytes count in the owner’s storage quota (406 when full). It is deleted after `lifetime_hours`.',
        body: NewAssetRequest,
        response: { 201: Asset, ...errorResponses(401, 403, 406, 409, 413, 422) },
      },
    },
    async (request, reply) => {
      const { body } = request;
      const asset = await assets.create(callerOf(request.principal), {
        lifetimeHours: body.lifetime_hours,
        name: body.name ?? null,
        mimeType: body.mime_type ?? null,
        contents: typeof body.contents === 'string' ? Buffer.from(body.contents, 'base64') : null,
      });
      return reply.code(201).send(assetView(asset));
    },
  );

  r.get(
    '/v1/storage/assets/',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['storage'],
        summary: 'List Assets',
        description:
          'The caller’s unexpired assets, newest first, those its agents made among them.',
        querystring: PageQuery,
        response: { 200: AssetsList, ...errorResponses(401, 422) },
      },
    },
    async (request) => assetsListView(await assets.list(userOf(request), request.query)),
  );

  r.get(
    '/v1/storage/assets/:asset_id/',
    {
      config: { auth: 'user-or-any-agent' },
      schema: {
        tags: ['storage'],
        summary: 'Retrieve Asset',
        description:
          'The asset’s metadata, for its owner, the agent that made it and the agents it is shared with for reading; 404 for anyone else.',
        params: AssetParams,
        response: { 200: Asset, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) =>
      assetView(await assets.get(callerOf(request.principal), request.params.asset_id)),
  );

  r.delete(
    '/v1/storage/assets/:asset_id/',
    {
      config: { auth: 'user-or-any-agent' },
      schema: {
        tags: ['storage'],
        summary: 'Delete Asset',
        description:
          'Deletes the asset, its contents and its permissions, and frees its bytes: its owner or the agent that made it.',
        params: AssetParams,
        response: { 204: Type.Null(), ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      await assets.remove(callerOf(request.principal), request.params.asset_id);
      return reply.code(204).send(null);
    },
  );

  r.get(
    '/v1/storage/assets/:asset_id/contents/',
    {
      config: { auth: 'user-or-any-agent' },
      schema: {
        tags: ['storage'],
        summary: 'Download Asset',
        description:
          'The asset’s contents, base64 in JSON; with an `Accept` header that asks for neither JSON nor anything (`*/*`), the bytes as they are, with the asset’s MIME type. For its owner, the agent that made it and the agents it is shared with for reading; 404 for anyone else, and while it has no contents.',
        params: AssetParams,
        response: { 200: AssetDownload, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      const { asset, contents } = await assets.download(
        callerOf(request.principal),
        request.params.asset_id,
      );
      if (wantsRaw(request)) return sendRaw(reply, asset, contents);
      return downloadView(asset, contents);
    },
  );

  r.get(
    '/v1/storage/:asset_id',
    {
      config: { auth: 'user-or-any-agent' },
      schema: {
        tags: ['storage'],
        summary: 'Open Asset',
        description:
          'Where an `agent-storage://` link leads: examples name an asset `agent-storage://<storage URL>/<asset_id>`, and a reader drops the scheme and fetches the rest. Answers the contents as they are, with the asset’s MIME type (sandboxed, never run as a page of this site); with an `Accept` header that asks for JSON, as `GET /v1/storage/assets/{asset_id}/contents/` answers them. For its owner, the agent that made it and the agents it is shared with for reading; 404 for anyone else, and while it has no contents.',
        params: AssetParams,
        response: { 200: AssetDownload, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      const { asset, contents } = await assets.download(
        callerOf(request.principal),
        request.params.asset_id,
      );
      if (/json/i.test(request.headers.accept ?? '')) return downloadView(asset, contents);
      return sendRaw(reply, asset, contents);
    },
  );

  // The upload of contents takes any Content-Type: JSON as the clients send it, anything else
  // as the contents themselves. Its parsers are its own, in a scope of its own.
  await app.register(async (scope) => {
    scope.removeContentTypeParser('*');
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body, done) => {
      if (request.headers['content-type'] !== undefined) {
        done(null, body);
        return;
      }
      try {
        done(null, parseJsonBody((body as Buffer).toString('utf8')));
      } catch (err) {
        done(err as Error, undefined);
      }
    });
    scope.withTypeProvider<TypeBoxTypeProvider>().put(
      '/v1/storage/assets/:asset_id/contents/',
      {
        config: { auth: 'user-or-any-agent' },
        bodyLimit,
        schema: {
          tags: ['storage'],
          summary: 'Upload Asset Contents',
          description:
            'Replaces the asset’s contents: JSON with `mime_type` and base64 `contents`, as `ExternalStorage.upload` sends them, or the bytes themselves with their MIME type as the Content-Type. For its owner, the agent that made it and the agents it is shared with for writing. The change of size counts in the owner’s storage quota (406 when full).',
          params: AssetParams,
          body: {
            content: {
              'application/json': { schema: AssetContentRequest },
              '*/*': {
                schema: {
                  description: 'the contents as they are; the Content-Type is their MIME type',
                },
              },
            },
          } as never,
          response: { 200: UploadAssetResponse, ...errorResponses(401, 403, 404, 406, 413, 422) },
        },
      },
      async (request: FastifyRequest<{ Params: { asset_id: string } }>, reply: FastifyReply) => {
        const { mimeType, contents } = uploadOf(request);
        const asset = await assets.upload(callerOf(request.principal), request.params.asset_id, {
          mimeType,
          contents,
        });
        return reply.send(uploadView(asset));
      },
    );
  });

  r.get(
    '/v1/storage/assets/:asset_id/permissions/',
    {
      config: { auth: 'user-or-any-agent' },
      schema: {
        tags: ['storage'],
        summary: 'List Asset Permissions',
        description:
          'The agents the asset is shared with (or only the one named), oldest first: for its owner and the agent that made it.',
        params: AssetParams,
        querystring: PermissionsQuery,
        response: { 200: PermissionList, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const { agent_address, offset, limit } = request.query;
      return permissionListView(
        await assets.permissions(callerOf(request.principal), request.params.asset_id, {
          ...(agent_address !== undefined && { agentAddress: agent_address }),
          offset,
          limit,
        }),
      );
    },
  );

  r.put(
    '/v1/storage/assets/:asset_id/permissions/',
    {
      config: { auth: 'user-or-any-agent' },
      schema: {
        tags: ['storage'],
        summary: 'Add Permission',
        description:
          'Shares the asset with an agent, for reading, writing or both (or changes what it may do): for its owner and the agent that made it. At most 100 agents per asset.',
        params: AssetParams,
        body: NewPermissionRequest,
        response: { 200: Permission, ...errorResponses(401, 403, 404, 409, 422) },
      },
    },
    async (request) => {
      const { agent_address, read, write } = request.body;
      return permissionView(
        await assets.setPermission(callerOf(request.principal), request.params.asset_id, {
          agentAddress: agent_address,
          read,
          write,
        }),
      );
    },
  );

  r.delete(
    '/v1/storage/assets/:asset_id/permissions/',
    {
      config: { auth: 'user-or-any-agent' },
      schema: {
        tags: ['storage'],
        summary: 'Delete Asset Permission For An Agent',
        description:
          'Withdraws the named agent’s permission (404 if it had none), or every agent’s when none is named: for the asset’s owner and the agent that made it.',
        params: AssetParams,
        querystring: PermissionDeleteQuery,
        response: { 204: Type.Null(), ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      await assets.removePermission(
        callerOf(request.principal),
        request.params.asset_id,
        request.query.agent_address,
      );
      return reply.code(204).send(null);
    },
  );
}

/** The contents of an upload and their type, from JSON or from the bytes sent as they are. */
function uploadOf(request: FastifyRequest): { mimeType: string; contents: Buffer } {
  const body = request.body as unknown;
  const contentType = request.headers['content-type'];
  const raw =
    Buffer.isBuffer(body) ||
    (body === undefined && contentType !== undefined && request.mediaType !== 'application/json');
  if (raw) {
    if (contentType === undefined || !isMimeType(contentType)) {
      throw RequestValidationError.single(
        ['header', 'content-type'],
        'Value error, the Content-Type of contents sent as they are must be their MIME type, such as image/png',
      );
    }
    return { mimeType: contentType, contents: Buffer.isBuffer(body) ? body : Buffer.alloc(0) };
  }
  const issues = checkContent(body);
  if (issues.length > 0) throw new RequestValidationError(issues);
  const { mime_type, contents } = body as AssetContentRequest;
  return { mimeType: mime_type, contents: Buffer.from(contents, 'base64') };
}
