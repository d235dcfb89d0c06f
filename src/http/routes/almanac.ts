import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { signerOf } from '../../services/almanac.js';
import { FEDERATED_LOOKUP_HEADER } from '../../services/federation/service.js';
import {
  AgentRegistrationAttestation,
  AgentRegistrationAttestationBatch,
  AgentStatusUpdate,
  AlmanacAgent,
  ManifestDigestParams,
  ManifestNameParams,
  ModelDigestParams,
  ProtocolManifest,
  ProtocolModel,
  ResolveQuery,
  V2ManifestDigestParams,
} from '../../wire/almanac.js';
import { AddressParams, EmptyObject, errorResponses } from '../../wire/common.js';
import { requireSame } from '../plugins/validation.js';
import { almanacAgent } from '../../views/almanac.js';

/** Names the peer or upstream an answer from afar came from (docs/federation.md). */
const HOME_HEADER = 'x-agentry-home';

/** No credentials anywhere: every write is signed by the agent it is about. */
export function almanacRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const almanac = ctx.services.almanac;

  r.post(
    '/v1/almanac/agents',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Register Agent',
        description:
          "Stores the agent's endpoints, protocols and metadata for 48 hours from the signed timestamp. Refused unless signed by the agent and no older than the stored registration (of two signed in the same second, the last received wins).",
        body: AgentRegistrationAttestation,
        response: { 200: EmptyObject, ...errorResponses(400, 422) },
      },
    },
    async (request) => {
      await almanac.register(request.body);
      return {};
    },
  );

  r.post(
    '/v1/almanac/agents/batch',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Register Agents',
        description:
          'Each attestation is checked as a single registration; all are stored or none is.',
        body: AgentRegistrationAttestationBatch,
        response: { 200: EmptyObject, ...errorResponses(400, 422) },
      },
    },
    async (request) => {
      await almanac.registerBatch(request.body.attestations);
      return {};
    },
  );

  r.post(
    '/v1/almanac/agents/:address/status',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Update Agent Status',
        description: 'Marks the agent active or inactive; signed by the agent.',
        params: AddressParams,
        body: AgentStatusUpdate,
        response: { 200: EmptyObject, ...errorResponses(400, 422) },
      },
    },
    async (request) => {
      requireSame(signerOf(request.body).address, request.params.address, {
        loc: ['body', 'agent_identifier'],
        msg: 'agent_identifier names another agent than the path',
      });
      await almanac.updateStatus(request.body);
      return {};
    },
  );

  r.get(
    '/v1/almanac/agents/:address',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Resolve Agent',
        description:
          "The agent's registration while it has not expired; 404 otherwise, or when `prefix` names another network. An address held nowhere here is looked for at the peers and upstreams (docs/federation.md); an answer from afar carries the `x-agentry-home` header.",
        params: AddressParams,
        querystring: ResolveQuery,
        response: { 200: AlmanacAgent, ...errorResponses(404, 422) },
      },
    },
    async (request, reply) => {
      const entry = await almanac.resolve(request.params.address, request.query.prefix, {
        // Another Agentry looking for it: answered from what is held here, never passed on.
        localOnly: request.headers[FEDERATED_LOOKUP_HEADER] !== undefined,
      });
      if (entry.home !== undefined) void reply.header(HOME_HEADER, entry.home);
      return almanacAgent(entry);
    },
  );

  r.post(
    '/v1/almanac/manifests',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Publish Protocol Manifest',
        description:
          'Stores a protocol manifest under metadata.digest. A manifest that hashes to its digest replaces one that does not; otherwise the first stays.',
        body: ProtocolManifest,
        response: { 200: EmptyObject, ...errorResponses(422) },
      },
    },
    async (request) => {
      await almanac.publishManifest(request.body);
      return {};
    },
  );

  r.get(
    '/v1/almanac/manifests/protocols/:digest',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Get Protocol Manifest',
        params: ManifestDigestParams,
        response: { 200: ProtocolManifest, ...errorResponses(404) },
      },
    },
    (request) => almanac.findManifest(request.params.digest),
  );

  // Almanac v2's manifest paths: the same manifests, also found by name and by model.
  r.post(
    '/v2/almanac/manifest',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Upload Manifest V2',
        description: 'The same as POST /v1/almanac/manifests.',
        body: ProtocolManifest,
        response: { 200: EmptyObject, ...errorResponses(422) },
      },
    },
    async (request) => {
      await almanac.publishManifest(request.body);
      return {};
    },
  );

  r.get(
    '/v2/almanac/manifest/:digest',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Get Manifest V2',
        description: 'A manifest by its protocol digest.',
        params: V2ManifestDigestParams,
        response: { 200: ProtocolManifest, ...errorResponses(404, 422) },
      },
    },
    (request) => almanac.findManifest(request.params.digest),
  );

  r.get(
    '/v2/almanac/manifest/name/:name',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Get Manifest By Name V2',
        description:
          "The latest version of the protocol the name names (its manifest's `metadata.name`): of the manifests that hash to their digest if any does, the highest version.",
        params: ManifestNameParams,
        response: { 200: ProtocolManifest, ...errorResponses(404, 422) },
      },
    },
    (request) => almanac.findManifestByName(request.params.name),
  );

  r.get(
    '/v2/almanac/manifest/model/:digest',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Get Protocol Model V2',
        description: 'A model by its digest, as a stored manifest holds it: `{digest, schema}`.',
        params: ModelDigestParams,
        response: { 200: ProtocolModel, ...errorResponses(404, 422) },
      },
    },
    (request) => almanac.findModel(request.params.digest),
  );
}
