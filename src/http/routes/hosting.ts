import type { Static, TSchema, TUnknown } from '@sinclair/typebox';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { agentInBody, agentInPath, type CallSubject } from '../../auth/principal.js';
import type { AppContext } from '../../context.js';
import type { HostedAgentListQuery } from '../../services/hosting/index.js';
import {
  agentCodeView,
  agentLogView,
  agentSummaryView,
  agentV1View,
  hostingStatusView,
  publicAgentView,
  secretView,
} from '../../views/hosting.js';
import { EmptyObject, errorResponses } from '../../wire/common.js';
import {
  AgentCode,
  AgentCodeDigest,
  AgentList,
  AgentListQuery,
  AgentLogs,
  AgentV1,
  HostedAgentParams,
  HostingQuery,
  HostingStatus,
  HostingTeamParams,
  NewAgent,
  PublicAgentV1,
  SecretCreate,
  Secret,
  SecretList,
  SecretParams,
  StorageItem,
  StorageItemUpdate,
  StorageList,
  StorageParams,
  StorageQuery,
  TeamHostedAgentParams,
  TeamSecretParams,
  TeamStorageParams,
  UpdateAgent,
  UpdateAgentCode,
  UpdateAgentNetwork,
  type AgentListQuery as AgentListQueryType,
} from '../../wire/hosting.js';
import { actorOf, userOf } from '../plugins/auth.js';

const TAG = 'hosting';
/** Agents a page of the list holds. */
const AGENT_PAGE = 100;

/** The path parameters of each kind of call: the caller's variant, and the team's. */
const PARAMS = {
  none: { caller: undefined, team: HostingTeamParams },
  agent: { caller: HostedAgentParams, team: TeamHostedAgentParams },
  storage: { caller: StorageParams, team: TeamStorageParams },
  secret: { caller: SecretParams, team: TeamSecretParams },
};

/** Which path parameters a call takes besides the team's slug. */
type ParamsKind = keyof typeof PARAMS;

/** A call's path parameters, as its caller's variant has them (the team's adds `slug`). */
type ParamsOf<K extends ParamsKind> = K extends 'none'
  ? Record<never, never>
  : Static<NonNullable<(typeof PARAMS)[K]['caller']>>;

/** What a hosting call reads of its request, as its schemas have checked it. */
interface HostingCall<K extends ParamsKind, Q extends TSchema, B extends TSchema> {
  Params: ParamsOf<K>;
  Querystring: Static<Q>;
  Body: Static<B>;
}

interface HostingOperation<
  K extends ParamsKind,
  Q extends TSchema,
  B extends TSchema,
  R extends TSchema,
> {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** The path after the prefix (`/v1/hosting`, or `/v1/hosting/teams/:slug` for a team). */
  path: string;
  summary: string;
  description: string;
  params: K;
  querystring?: Q;
  body?: B;
  bodyLimit?: number;
  response: R;
  errors: number[];
  /**
   * What the call is about (docs/keys.md): the path's agent when it names one; otherwise what
   * this says (the body's agent), or the owner's hosted agents as a whole.
   */
  about?: CallSubject;
  /** Does the call for `owner` (the caller, or the team the path names). */
  handle(owner: string, request: FastifyRequest<HostingCall<K, Q, B>>): Promise<Static<R>>;
}

/** The list query as the service takes it: `sort_by`'s leading `-` or `direction` reverses. */
function listQuery(query: AgentListQueryType): HostedAgentListQuery {
  const sort = /^(-?)(modified|created|name)$/.exec(query.sort_by ?? 'created')!;
  return {
    name: query.name,
    order: sort[2] as HostedAgentListQuery['order'],
    descending: sort[1] === '-' || query.direction === 'desc',
    limit: AGENT_PAGE,
    offset: query.cursor === undefined ? 0 : Number(query.cursor),
  };
}

/** The `:slug` of a team's path; none (naming no team, so 404) where the path has none. */
function slugIn(params: unknown): string {
  return typeof params === 'object' && params !== null && 'slug' in params
    ? String(params.slug)
    : '';
}

export interface HostingRoutesOptions {
  ctx: AppContext;
  /**
   * Whose hosted agents the calls are about: the caller's (or those of the team `x-team`
   * names), under `/v1/hosting`; or those of the team the path's `:slug` names, of which the
   * caller is a member, under `/v1/hosting/teams/:slug`.
   */
  owner: 'caller' | 'team-in-path';
}

/**
 * The Hosting API (docs/hosting.md): hosted agents, their code, state, logs, secrets and
 * storage. Registered twice: under `/v1/hosting` for the caller (or the team `x-team` names),
 * and under `/v1/hosting/teams/:slug` for a team the caller belongs to (see
 * `HostingRoutesOptions.owner`).
 */
export const hostingRoutes: FastifyPluginAsync<HostingRoutesOptions> = async (
  app,
  { ctx, owner: ownerKind },
) => {
  const { hosting, teams } = ctx.services;
  const forTeam = ownerKind === 'team-in-path';
  const storageBodyLimit = Math.max(ctx.config.bodyLimitBytes, 2 * ctx.config.hosting.storageBytes);

  /** The owner a call is for: the caller, or the team the path names (404 for anyone else). */
  const ownerOf = async (request: FastifyRequest): Promise<string> =>
    forTeam
      ? teams.ownerNamedInPath(actorOf(request), userOf(request), slugIn(request.params))
      : userOf(request);

  function add<
    K extends ParamsKind,
    R extends TSchema,
    Q extends TSchema = typeof HostingQuery,
    B extends TSchema = TUnknown,
  >(operation: HostingOperation<K, Q, B, R>): void {
    const params = forTeam ? PARAMS[operation.params].team : PARAMS[operation.params].caller;
    app.route<HostingCall<K, Q, B>>({
      method: operation.method,
      url: operation.path,
      config: {
        auth: 'user',
        about: operation.params === 'none' ? operation.about : agentInPath(),
      },
      ...(operation.bodyLimit !== undefined && { bodyLimit: operation.bodyLimit }),
      schema: {
        tags: [TAG],
        summary: forTeam ? `${operation.summary} (team)` : operation.summary,
        description: forTeam
          ? `${operation.description} For the team the path names, of which the caller is a member (404 for anyone else).`
          : operation.description,
        ...(params && { params }),
        querystring: operation.querystring ?? HostingQuery,
        ...(operation.body && { body: operation.body }),
        response: { 200: operation.response, ...errorResponses(...operation.errors) },
      },
      handler: async (request) => operation.handle(await ownerOf(request), request),
    });
  }

  add({
    method: 'GET',
    path: '/agents',
    summary: 'List Hosted Agents',
    description:
      'The owner’s hosted agents, a page of 100 at a time (`next_cursor` is the next page’s `cursor`), in creation order unless `sort_by` says otherwise; `name` keeps those whose name holds the text.',
    params: 'none',
    querystring: AgentListQuery,
    response: AgentList,
    errors: [401, 403, 404, 422],
    handle: async (owner, request) => {
      const query = listQuery(request.query);
      const agents = await hosting.list(owner, { ...query, limit: AGENT_PAGE + 1 });
      const more = agents.length > AGENT_PAGE;
      return {
        items: agents.slice(0, AGENT_PAGE).map(agentSummaryView),
        next_cursor: more ? String(query.offset + AGENT_PAGE) : null,
      };
    },
  });

  // About the deployment, not an owner: served once, not again for each team.
  if (!forTeam) {
    add({
      method: 'GET',
      path: '/status',
      summary: 'Get Hosting Status',
      description:
        'Whether hosted agents can run on this deployment (a runner is alive, or this server runs them, and there is a key to seal their seeds), and otherwise why not and the one command with which the operator lets them (Agentry’s addition).',
      params: 'none',
      response: HostingStatus,
      errors: [401, 403, 422],
      handle: async () => hostingStatusView(await hosting.status()),
    });
  }

  add({
    method: 'POST',
    path: '/agents',
    summary: 'Create Hosted Agent',
    description:
      'A new agent that Agentry runs: Agentry makes its key (kept sealed, never shown) and lists it as the owner’s agent with a mailbox, as any other. It starts stopped and without code. 503 when this server has no hosting key.',
    params: 'none',
    body: NewAgent,
    response: AgentV1,
    errors: [401, 403, 404, 406, 409, 422, 503],
    handle: async (owner, request) => agentV1View(await hosting.create(owner, request.body)),
  });

  add({
    method: 'GET',
    path: '/agents/:address/profile',
    summary: 'Get Hosted Agent Profile',
    description: 'The agent as others see it in a listing.',
    params: 'agent',
    response: PublicAgentV1,
    errors: [401, 403, 404, 422],
    handle: async (owner, { params }) =>
      publicAgentView(await hosting.profile(owner, params.address)),
  });

  add({
    method: 'GET',
    path: '/agents/:address',
    summary: 'Get Hosted Agent',
    description:
      'The agent, with `state` and `state_reason` (Agentry’s): what it is doing and why, such as the exit of a crash or a crash loop it was stopped for.',
    params: 'agent',
    response: AgentV1,
    errors: [401, 403, 404, 422],
    handle: async (owner, { params }) => agentV1View(await hosting.get(owner, params.address)),
  });

  add({
    method: 'PUT',
    path: '/agents/:address',
    summary: 'Update Hosted Agent',
    description:
      'Sets the name, readme, avatar URL and short description given; null or left out keeps what is stored.',
    params: 'agent',
    body: UpdateAgent,
    response: EmptyObject,
    errors: [401, 403, 404, 409, 422],
    handle: async (owner, { params, body }) => {
      await hosting.update(owner, params.address, body);
      return {};
    },
  });

  add({
    method: 'DELETE',
    path: '/agents/:address',
    summary: 'Delete Hosted Agent',
    description:
      'Stops the agent and deletes it: its listing, mailbox and history as DELETE /v2/agents/{address} does, and its key, code, secrets, storage and logs.',
    params: 'agent',
    response: EmptyObject,
    errors: [401, 403, 404, 422],
    handle: async (owner, { params }) => {
      await hosting.delete(owner, params.address);
      return {};
    },
  });

  add({
    method: 'POST',
    path: '/agents/:address/duplicate',
    summary: 'Duplicate Hosted Agent',
    description:
      'A new hosted agent (a key of its own) with the name and profile given and a copy of this one’s code; secrets and storage are not copied. It starts stopped.',
    params: 'agent',
    body: NewAgent,
    response: AgentV1,
    errors: [401, 403, 404, 406, 409, 422, 503],
    handle: async (owner, { params, body }) =>
      agentV1View(await hosting.duplicate(owner, params.address, body)),
  });

  add({
    method: 'GET',
    path: '/agents/:address/code',
    summary: 'Get Hosted Agent Code',
    description: 'The code as it was put, its digest and when; nulls before any.',
    params: 'agent',
    response: AgentCode,
    errors: [401, 403, 404, 422],
    handle: async (owner, { params }) => agentCodeView(await hosting.code(owner, params.address)),
  });

  add({
    method: 'PUT',
    path: '/agents/:address/code',
    summary: 'Update Hosted Agent Code',
    description:
      'Replaces the code: a JSON string of a list of 1 to 50 files `{"name", "value", "language"}` with safe relative names (no `..`, no leading `/`, nothing hidden), one named `agent.py` (what runs), at most 1 MiB in all; anything else is answered 422 saying what is wrong. Answers the SHA-256 of the text. A running agent restarts with it.',
    params: 'agent',
    body: UpdateAgentCode,
    // The code's 1 MiB, escaped in JSON.
    bodyLimit: 8 * 1024 * 1024,
    response: AgentCodeDigest,
    errors: [401, 403, 404, 413, 422],
    handle: async (owner, { params, body }) => ({
      digest: await hosting.setCode(owner, params.address, body.code),
    }),
  });

  add({
    method: 'GET',
    path: '/agents/:address/storage',
    summary: 'List Hosted Agent Storage',
    description:
      'The agent’s storage (what its code keeps in `ctx.storage`), 100 keys at a time in key order; `next_cursor` is the next page’s `cursor`.',
    params: 'agent',
    querystring: StorageQuery,
    response: StorageList,
    errors: [401, 403, 404, 422],
    handle: async (owner, { params, query }) => {
      const page = await hosting.ownerStorageList(owner, params.address, query.cursor);
      return { items: page.items, next_cursor: page.next };
    },
  });

  add({
    method: 'GET',
    path: '/agents/:address/storage/:key',
    summary: 'Get Hosted Agent Storage Key',
    description: 'One key of the agent’s storage; 404 when it holds none of that name.',
    params: 'storage',
    response: StorageItem,
    errors: [401, 403, 404, 422],
    handle: async (owner, { params }) => ({
      key: params.key,
      value: await hosting.ownerStorageGet(owner, params.address, params.key),
    }),
  });

  add({
    method: 'PUT',
    path: '/agents/:address/storage/:key',
    summary: 'Set Hosted Agent Storage Key',
    description:
      'Sets one key of the agent’s storage. The storage is bounded per agent (keys, and bytes of keys and values, by the server’s settings): past either, 413 saying which.',
    params: 'storage',
    body: StorageItemUpdate,
    bodyLimit: storageBodyLimit,
    response: StorageItem,
    errors: [401, 403, 404, 413, 422],
    handle: async (owner, { params, body }) => {
      const { value } = body;
      await hosting.ownerStorageSet(owner, params.address, params.key, value);
      return { key: params.key, value };
    },
  });

  add({
    method: 'DELETE',
    path: '/agents/:address/storage/:key',
    summary: 'Delete Hosted Agent Storage Key',
    description: 'Deletes one key of the agent’s storage; 404 when it holds none of that name.',
    params: 'storage',
    response: EmptyObject,
    errors: [401, 403, 404, 422],
    handle: async (owner, { params }) => {
      await hosting.ownerStorageDelete(owner, params.address, params.key);
      return {};
    },
  });

  add({
    method: 'POST',
    path: '/agents/:address/start',
    summary: 'Start Hosted Agent',
    description:
      'Asks for the agent to run (409 without code). A runner of this server starts it; `state` follows what it does. An agent that failed is started afresh.',
    params: 'agent',
    response: AgentV1,
    errors: [401, 403, 404, 409, 422],
    handle: async (owner, { params }) => agentV1View(await hosting.start(owner, params.address)),
  });

  add({
    method: 'POST',
    path: '/agents/:address/stop',
    summary: 'Stop Hosted Agent',
    description:
      'Asks for the agent to stop; its runner ends its process, and `state` becomes stopped.',
    params: 'agent',
    response: AgentV1,
    errors: [401, 403, 404, 422],
    handle: async (owner, { params }) => agentV1View(await hosting.stop(owner, params.address)),
  });

  add({
    method: 'GET',
    path: '/agents/:address/logs/latest',
    summary: 'Get Hosted Agent Latest Logs',
    description:
      'The newest lines of the agent’s output and of what happened to it (at most 1000), oldest first.',
    params: 'agent',
    response: AgentLogs,
    errors: [401, 403, 404, 422],
    handle: async (owner, { params }) =>
      (await hosting.latestLogs(owner, params.address)).map(agentLogView),
  });

  add({
    method: 'DELETE',
    path: '/agents/:address/logs',
    summary: 'Delete Hosted Agent Logs',
    description: 'Deletes every kept line of the agent’s log.',
    params: 'agent',
    response: EmptyObject,
    errors: [401, 403, 404, 422],
    handle: async (owner, { params }) => {
      await hosting.clearLogs(owner, params.address);
      return {};
    },
  });

  add({
    method: 'PUT',
    path: '/agents/:address/network',
    summary: 'Update Hosted Agent Network',
    description: 'Sets the network the agent registers on (testnet when left out).',
    params: 'agent',
    body: UpdateAgentNetwork,
    response: EmptyObject,
    errors: [401, 403, 404, 422],
    handle: async (owner, { params, body }) => {
      const { network } = body;
      await hosting.setNetwork(owner, params.address, network ?? 'testnet');
      return {};
    },
  });

  add({
    method: 'GET',
    path: '/secrets',
    summary: 'List Hosting Secrets',
    description:
      'Every secret of the owner’s hosted agents, values masked; `address` (Agentry’s) says whose.',
    params: 'none',
    response: SecretList,
    errors: [401, 403, 404, 422],
    handle: async (owner) => ({ secrets: (await hosting.secrets(owner)).map(secretView) }),
  });

  add({
    method: 'POST',
    path: '/secrets',
    summary: 'Set Hosting Secret',
    description:
      'Sets a secret of an agent (one of the same name is replaced); its process reads it as an environment variable of that name. The name is a Python identifier, not starting with AGENTRY_. The value is kept sealed and never answered. 503 when this server has no hosting key.',
    params: 'none',
    about: agentInBody(),
    body: SecretCreate,
    response: Secret,
    errors: [401, 403, 404, 409, 422, 503],
    handle: async (owner, { body }) => secretView(await hosting.putSecret(owner, body)),
  });

  add({
    method: 'GET',
    path: '/:address/secrets',
    summary: 'List Hosted Agent Secrets',
    description: 'The agent’s secrets, values masked.',
    params: 'agent',
    response: SecretList,
    errors: [401, 403, 404, 422],
    handle: async (owner, { params }) => ({
      secrets: (await hosting.agentSecrets(owner, params.address)).map(secretView),
    }),
  });

  add({
    method: 'DELETE',
    path: '/secrets/:address/:name',
    summary: 'Delete Hosting Secret',
    description: 'Deletes one secret of the agent; 404 when it has none of that name.',
    params: 'secret',
    response: EmptyObject,
    errors: [401, 403, 404, 422],
    handle: async (owner, { params }) => {
      await hosting.deleteSecret(owner, params.address, params.name);
      return {};
    },
  });
};
