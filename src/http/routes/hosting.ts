import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TSchema } from '@sinclair/typebox';
import { agentInBody, agentInPath, type CallSubject } from '../../auth/principal.js';
import type { AppContext } from '../../context.js';
import type { HostedAgentListQuery } from '../../services/hosting/index.js';
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
  type NewAgent as NewAgentType,
  type UpdateAgent as UpdateAgentType,
} from '../../wire/hosting.js';
import { actorOf, userOf } from '../plugins/auth.js';
import {
  agentCodeView,
  agentLogView,
  agentSummaryView,
  agentV1View,
  publicAgentView,
  secretView,
} from '../../views/hosting.js';

const TAG = 'hosting';
/** Agents a page of the list holds. */
const AGENT_PAGE = 100;

/** What a hosting call reads of its request once its schema has checked it. */
interface HostingRequest {
  params: { address: string; key: string; name: string };
  query: Record<string, unknown>;
  body: unknown;
}

/** Which path parameters a call takes besides the team's slug. */
type ParamsKind = 'none' | 'agent' | 'storage' | 'secret';

const PARAMS: Record<ParamsKind, { user?: TSchema; team: TSchema }> = {
  none: { team: HostingTeamParams },
  agent: { user: HostedAgentParams, team: TeamHostedAgentParams },
  storage: { user: StorageParams, team: TeamStorageParams },
  secret: { user: SecretParams, team: TeamSecretParams },
};

interface HostingOperation {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** The path after `/v1/hosting`; the team's variant has `/teams/:slug` after that prefix. */
  path: string;
  summary: string;
  description: string;
  params: ParamsKind;
  querystring?: TSchema;
  body?: TSchema;
  bodyLimit?: number;
  response: TSchema;
  errors: number[];
  /**
   * What the call is about (docs/keys.md): the path's agent when it names one; otherwise what
   * this says (the body's agent), or the owner's hosted agents as a whole.
   */
  about?: CallSubject;
  /** Does the call for `owner` (the caller, or the team the path names). */
  handle(owner: string, request: HostingRequest): Promise<unknown>;
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

/**
 * The Hosting API (docs/hosting.md): hosted agents, their code, state, logs, secrets and
 * storage, each call for the caller (or the team `x-team` names) and again under
 * `/v1/hosting/teams/{slug}` for a team the caller belongs to.
 */
export function hostingRoutes(app: FastifyInstance, ctx: AppContext): void {
  const { hosting, teams } = ctx.services;
  const storageBodyLimit = Math.max(ctx.config.bodyLimitBytes, 2 * ctx.config.hosting.storageBytes);

  const operations: HostingOperation[] = [
    {
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
        const query = listQuery(request.query as AgentListQueryType);
        const agents = await hosting.list(owner, { ...query, limit: AGENT_PAGE + 1 });
        const more = agents.length > AGENT_PAGE;
        return {
          items: agents.slice(0, AGENT_PAGE).map(agentSummaryView),
          next_cursor: more ? String(query.offset + AGENT_PAGE) : null,
        };
      },
    },
    {
      method: 'POST',
      path: '/agents',
      summary: 'Create Hosted Agent',
      description:
        'A new agent that Agentry runs: Agentry makes its key (kept sealed, never shown) and lists it as the owner’s agent with a mailbox, as any other. It starts stopped and without code. 503 when this server has no hosting key.',
      params: 'none',
      body: NewAgent,
      response: AgentV1,
      errors: [401, 403, 404, 406, 409, 422, 503],
      handle: async (owner, request) =>
        agentV1View(await hosting.create(owner, request.body as NewAgentType)),
    },
    {
      method: 'GET',
      path: '/agents/:address/profile',
      summary: 'Get Hosted Agent Profile',
      description: 'The agent as others see it in a listing.',
      params: 'agent',
      response: PublicAgentV1,
      errors: [401, 403, 404, 422],
      handle: async (owner, { params }) =>
        publicAgentView(await hosting.profile(owner, params.address)),
    },
    {
      method: 'GET',
      path: '/agents/:address',
      summary: 'Get Hosted Agent',
      description:
        'The agent, with `state` and `state_reason` (Agentry’s): what it is doing and why, such as the exit of a crash or a crash loop it was stopped for.',
      params: 'agent',
      response: AgentV1,
      errors: [401, 403, 404, 422],
      handle: async (owner, { params }) => agentV1View(await hosting.get(owner, params.address)),
    },
    {
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
        await hosting.update(owner, params.address, body as UpdateAgentType);
        return {};
      },
    },
    {
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
    },
    {
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
        agentV1View(await hosting.duplicate(owner, params.address, body as NewAgentType)),
    },
    {
      method: 'GET',
      path: '/agents/:address/code',
      summary: 'Get Hosted Agent Code',
      description: 'The code as it was put, its digest and when; nulls before any.',
      params: 'agent',
      response: AgentCode,
      errors: [401, 403, 404, 422],
      handle: async (owner, { params }) => agentCodeView(await hosting.code(owner, params.address)),
    },
    {
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
        digest: await hosting.setCode(owner, params.address, (body as { code: string }).code),
      }),
    },
    {
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
        const page = await hosting.ownerStorageList(
          owner,
          params.address,
          query.cursor as string | undefined,
        );
        return { items: page.items, next_cursor: page.next };
      },
    },
    {
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
    },
    {
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
        const { value } = body as { value: string };
        await hosting.ownerStorageSet(owner, params.address, params.key, value);
        return { key: params.key, value };
      },
    },
    {
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
    },
    {
      method: 'POST',
      path: '/agents/:address/start',
      summary: 'Start Hosted Agent',
      description:
        'Asks for the agent to run (409 without code). A runner of this server starts it; `state` follows what it does. An agent that failed is started afresh.',
      params: 'agent',
      response: AgentV1,
      errors: [401, 403, 404, 409, 422],
      handle: async (owner, { params }) => agentV1View(await hosting.start(owner, params.address)),
    },
    {
      method: 'POST',
      path: '/agents/:address/stop',
      summary: 'Stop Hosted Agent',
      description:
        'Asks for the agent to stop; its runner ends its process, and `state` becomes stopped.',
      params: 'agent',
      response: AgentV1,
      errors: [401, 403, 404, 422],
      handle: async (owner, { params }) => agentV1View(await hosting.stop(owner, params.address)),
    },
    {
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
    },
    {
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
    },
    {
      method: 'PUT',
      path: '/agents/:address/network',
      summary: 'Update Hosted Agent Network',
      description: 'Sets the network the agent registers on (testnet when left out).',
      params: 'agent',
      body: UpdateAgentNetwork,
      response: EmptyObject,
      errors: [401, 403, 404, 422],
      handle: async (owner, { params, body }) => {
        const { network } = body as { network?: 'mainnet' | 'testnet' };
        await hosting.setNetwork(owner, params.address, network ?? 'testnet');
        return {};
      },
    },
    {
      method: 'GET',
      path: '/secrets',
      summary: 'List Hosting Secrets',
      description:
        'Every secret of the owner’s hosted agents, values masked; `address` (Agentry’s) says whose.',
      params: 'none',
      response: SecretList,
      errors: [401, 403, 404, 422],
      handle: async (owner) => ({ secrets: (await hosting.secrets(owner)).map(secretView) }),
    },
    {
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
      handle: async (owner, { body }) =>
        secretView(
          await hosting.putSecret(owner, body as { address: string; name: string; secret: string }),
        ),
    },
    {
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
    },
    {
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
    },
  ];

  for (const operation of operations) {
    for (const forTeam of [false, true]) {
      const params = forTeam ? PARAMS[operation.params].team : PARAMS[operation.params].user;
      const querystring = operation.querystring ?? HostingQuery;
      app.route({
        method: operation.method,
        url: forTeam ? `/v1/hosting/teams/:slug${operation.path}` : `/v1/hosting${operation.path}`,
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
          querystring,
          ...(operation.body && { body: operation.body }),
          response: { 200: operation.response, ...errorResponses(...operation.errors) },
        },
        handler: async (request: FastifyRequest) => {
          const owner = forTeam
            ? await teams.ownerNamedInPath(
                actorOf(request),
                userOf(request),
                (request.params as { slug: string }).slug,
              )
            : userOf(request);
          return operation.handle(owner, request as unknown as HostingRequest);
        },
      });
    }
  }
}
