import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { UserPrincipal } from '../../auth/principal.js';
import type { AppContext } from '../../context.js';
import { makerOf } from '../../services/keys.js';
import { errorResponses, Success } from '../../wire/common.js';
import { ApiKeyList, CreateApiKeyRequest, KeyParams, NewApiKey } from '../../wire/keys.js';
import { userOf } from '../plugins/auth.js';
import { apiKeyView, newApiKeyView } from '../../views/keys.js';

/** The key the request was made with (for a session, the key it was opened with). */
function keyOf(request: FastifyRequest): string {
  return request.principal.kind === 'user' ? request.principal.keyId : '';
}

/** The caller's API keys: list, create (shown once), revoke. */
export function keysRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { keys } = ctx.services;

  r.get(
    '/v2/api-keys',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['console'],
        summary: 'List API Keys',
        description: "The caller's API keys, oldest first; secrets are never shown again.",
        response: { 200: ApiKeyList, ...errorResponses(401) },
      },
    },
    async (request) =>
      (await keys.listKeys(userOf(request))).map((k) => apiKeyView(k, keyOf(request))),
  );

  r.post(
    '/v2/api-keys',
    {
      config: { auth: 'user', about: 'narrower-key' },
      schema: {
        tags: ['console'],
        summary: 'Create API Key',
        description:
          'A new key for the caller, shown once. Short-lived keys suit a single task, such as connecting one agent. `read_only` limits the key to GET and HEAD; `addresses` to calls about those agents (docs/keys.md says which calls are about an agent). A key makes no key broader than itself: a key limited to agents makes keys limited to some of them, an expiring key keys that expire no later. Made while acting for a team, the key is the team’s and works while its maker is a member.',
        body: CreateApiKeyRequest,
        response: { 200: NewApiKey, ...errorResponses(401, 403, 422) },
      },
    },
    async (request) => {
      const { label, expires_in_seconds: lifetime, read_only, addresses } = request.body;
      const key = await keys.createKey(
        userOf(request),
        {
          label: label ?? null,
          readOnly: read_only ?? false,
          addresses: addresses ?? null,
          ...(lifetime == null ? {} : { lifetimeMs: lifetime * 1000 }),
        },
        makerOf(request.principal as UserPrincipal),
      );
      return newApiKeyView(key);
    },
  );

  r.delete(
    '/v2/api-keys/:id',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['console'],
        summary: 'Revoke API Key',
        description: 'The key stops working at once, and so do sessions opened with it.',
        params: KeyParams,
        response: { 200: Success, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) => {
      await keys.revokeKey(request.params.id, userOf(request));
      return { success: true };
    },
  );
}
