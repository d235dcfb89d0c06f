import type { Static, TObject } from '@sinclair/typebox';
import type { UserPrincipal } from '../../auth/principal.js';
import type { AppContext } from '../../context.js';
import { NotFoundError } from '../../errors.js';
import { agentRecord } from '../../views/agents.js';
import { timelineEntry } from '../../views/activity.js';
import { almanacAgent } from '../../views/almanac.js';
import { chatEntryView, chatSessionView } from '../../views/chat.js';
import { deliveryEventView } from '../../views/deliveries.js';
import { agentLogView, agentV1View, secretView } from '../../views/hosting.js';
import { bodyChecker } from '../../wire/check.js';
import { LOG_LEVELS } from '../../wire/hosting.js';
import {
  AgentActivityArgs,
  ChatWithAgentArgs,
  CreateHostedAgentArgs,
  DeliveryTraceArgs,
  GetAgentArgs,
  HostedAgentArgs,
  HostedLogsArgs,
  PutHostedCodeArgs,
  ResolveNameArgs,
  SearchAgentsArgs,
  SendMessageArgs,
  SetHostedSecretArgs,
  StartHostedAgentArgs,
} from '../../wire/mcp.js';
import { AgentSearchCriteria } from '../../wire/search.js';

/** What a tool is given: its checked arguments, who calls, and how to tell of progress. */
export interface ToolCall<A> {
  args: A;
  principal: UserPrincipal;
  services: AppContext['services'];
  /** Tells the client how far a long call is (when it asked to hear). */
  progress(message: string): void;
  /** Aborted when the client cancels the call or goes away. */
  signal: AbortSignal;
}

/** A tool's answer: structured content (an object) and the words for a person or a model. */
export interface ToolAnswer {
  structured: Record<string, unknown>;
  text: string;
}

/** One tool of the MCP endpoint (docs/mcp.md, "Tools"). */
export interface McpTool<S extends TObject = TObject> {
  name: string;
  title: string;
  description: string;
  input: S;
  /** Whether it changes anything: a read-only key may not call it. */
  writes: boolean;
  /** The agent the call is about, for keys limited to agents; undefined: no one agent. */
  about?: (args: Static<S>) => string | undefined;
  run(call: ToolCall<Static<S>>): Promise<ToolAnswer>;
}

function tool<S extends TObject>(definition: McpTool<S>): McpTool {
  return definition as unknown as McpTool;
}

/** An answer whose text is its structured content as JSON (what clients without it read). */
function structured(value: Record<string, unknown>): ToolAnswer {
  return { structured: value, text: JSON.stringify(value) };
}

const byAddress = (args: { address: string }): string => args.address;

/** The Hosting API's code text (a JSON list of files) from a tool's `code` or `files`. */
function codeText(args: {
  code?: string;
  files?: { name: string; value: string; language?: string }[];
}): string | undefined {
  if (args.files !== undefined) {
    return JSON.stringify(
      args.files.map((file) => ({
        name: file.name,
        value: file.value,
        language: file.language ?? (file.name.endsWith('.py') ? 'python' : 'text'),
      })),
    );
  }
  if (args.code !== undefined) {
    return JSON.stringify([{ name: 'agent.py', value: args.code, language: 'python' }]);
  }
  return undefined;
}

const checkSearch = bodyChecker(AgentSearchCriteria);

/** The manifests Agentry holds of these protocols (those it does not hold are left out). */
export async function manifestsOf(
  almanac: AppContext['services']['almanac'],
  protocols: readonly { digest: string }[],
): Promise<unknown[]> {
  const found = await Promise.all(
    protocols.map((protocol) => almanac.findManifest(protocol.digest).catch(() => null)),
  );
  return found.filter((manifest) => manifest !== null);
}
const LEVEL_ORDER = new Map(LOG_LEVELS.map((level, index) => [level, index]));
/** How often a start waits to look at the agent's state again. */
const START_LOOK_MS = 200;

/** The tools, in the order `tools/list` names them. */
export const TOOLS: readonly McpTool[] = [
  tool({
    name: 'search_agents',
    title: 'Search agents',
    description:
      'Finds agents registered with this Agentry by words in their name, description, readme and protocols. Answers each agent’s address, name, description, protocols and status.',
    input: SearchAgentsArgs,
    writes: false,
    async run({ args, services }) {
      const criteria: Record<string, unknown> = {
        search_text: args.query,
        limit: args.limit ?? 10,
        offset: args.offset ?? 0,
        source: 'mcp',
      };
      checkSearch(criteria);
      const found = await services.search.searchAgents(
        criteria as Static<typeof AgentSearchCriteria>,
      );
      return structured({
        total: found.total,
        agents: found.agents.map((agent) => ({
          address: agent.address,
          name: agent.name,
          description: agent.description,
          handle: agent.handle,
          domain: agent.domain,
          status: agent.status,
          type: agent.type,
          unresponsive: agent.unresponsive,
          protocols: agent.protocols,
        })),
      });
    },
  }),

  tool({
    name: 'get_agent',
    title: 'Get an agent',
    description:
      'One agent: its public listing (name, description, readme, protocols, status) and the protocols’ manifests; for the caller’s own agents also its registration and what Agentry sees of it (status, last seen, failures).',
    input: GetAgentArgs,
    writes: false,
    about: byAddress,
    async run({ args, principal, services }) {
      const { search, agents, activity, almanac } = services;
      const notFound = (err: unknown) => {
        if (err instanceof NotFoundError) return undefined;
        throw err;
      };
      // One round of reads: the listing, the record and what Agentry sees of it, together.
      const [listing, own, statuses] = await Promise.all([
        search.searchAgent(args.address).catch(notFound),
        agents.get(principal.userId, args.address).catch(notFound),
        activity.statuses([args.address]),
      ]);
      if (listing === undefined && own === undefined) {
        throw new NotFoundError(`Agent ${args.address} is not listed here`);
      }
      const record = own && agentRecord(own, statuses.get(own.address)!);
      return structured({
        address: args.address,
        listing: listing ?? null,
        record: record ?? null,
        manifests: listing ? await manifestsOf(almanac, listing.protocols) : [],
      });
    },
  }),

  tool({
    name: 'resolve_name',
    title: 'Resolve a name',
    description:
      'The agent a name (alice.agent), a handle or an address stands for, as uAgents resolves it to send: its address, whether it is active, its endpoints and protocols.',
    input: ResolveNameArgs,
    writes: false,
    async run({ args, services }) {
      return structured({ ...almanacAgent(await services.search.resolve(args.name.trim())) });
    },
  }),

  tool({
    name: 'get_agent_activity',
    title: 'Read an agent’s activity',
    description:
      'The timeline of one of the caller’s agents, newest first: messages and what became of them, status changes, registrations, errors it reported.',
    input: AgentActivityArgs,
    writes: false,
    about: byAddress,
    async run({ args, principal, services }) {
      const page = await services.activity.timeline(principal, args.address, {
        ...(args.kind !== undefined ? { kind: args.kind } : {}),
        limit: args.limit ?? 50,
      });
      return structured({ entries: page.rows.map(timelineEntry) });
    },
  }),

  tool({
    name: 'get_delivery_trace',
    title: 'Read a delivery trace',
    description:
      'What happened to the messages of one of the caller’s agents (submitted, stored, polled, forwarded, delivered, expired, refused), oldest first; with message_id, everything about that one message.',
    input: DeliveryTraceArgs,
    writes: false,
    about: byAddress,
    async run({ args, principal, services }) {
      const { deliveries } = services;
      const rows =
        args.message_id !== undefined
          ? await deliveries.message(principal, args.address, args.message_id)
          : await deliveries.list(principal, args.address, { limit: args.limit ?? 50, offset: 0 });
      return structured({ events: rows.map(deliveryEventView) });
    },
  }),

  tool({
    name: 'chat_with_agent',
    title: 'Chat with an agent',
    description:
      'Says something to an agent that speaks the chat protocol, from the caller’s chat identity, and waits for its reply. Answers the reply’s text and the session id: give it back as session_id to continue the conversation.',
    input: ChatWithAgentArgs,
    writes: true,
    async run({ args, principal, services, progress, signal }) {
      const asked = await services.chat.ask(
        principal,
        {
          ...(args.session_id !== undefined && { session: args.session_id }),
          ...(args.agent !== undefined && { agent: args.agent }),
        },
        args.text,
        { timeoutMs: (args.timeout_seconds ?? 30) * 1000, signal, progress },
      );
      const { session, reader } = asked;
      const outcome = asked.timedOut ? 'no-reply' : reader.outcome;
      const answer = {
        session_id: session.id,
        agent: session.agent,
        outcome,
        reply: reader.text,
        acknowledged: reader.acknowledged,
        failure: reader.failure,
        entries: reader.entries,
        session: chatSessionView(session),
        message: chatEntryView(asked.message),
      };
      if (outcome === 'failed') {
        throw new ToolRefusal(
          `The message did not reach ${session.agent}: ${reader.failure}`,
          answer,
        );
      }
      if (outcome === 'no-reply' || outcome === 'waiting' || outcome === 'streaming') {
        const seconds = args.timeout_seconds ?? 30;
        throw new ToolRefusal(
          `No reply from ${session.agent} within ${seconds} s${reader.acknowledged ? ' (it acknowledged the message)' : ''}; continue with session_id ${session.id}`,
          answer,
        );
      }
      return { structured: answer, text: reader.text ?? `${session.agent} ended the session` };
    },
  }),

  tool({
    name: 'send_message',
    title: 'Send a message',
    description:
      'Sends one message of any model to an agent, signed by the caller’s chat identity, by the road any uAgents sender takes. Answers the message id the delivery trace knows it by.',
    input: SendMessageArgs,
    writes: true,
    async run({ args, principal, services }) {
      const sent = await services.chat.sendMessage(principal, args.to, {
        schemaDigest: args.schema_digest,
        ...(args.protocol_digest !== undefined && { protocolDigest: args.protocol_digest }),
        payload: args.payload,
      });
      const answer = { to: sent.to, message_id: sent.messageId, failure: sent.failure };
      if (sent.failure !== null) {
        throw new ToolRefusal(`The message did not reach ${sent.to}: ${sent.failure}`, answer);
      }
      return structured(answer);
    },
  }),

  tool({
    name: 'create_hosted_agent',
    title: 'Create a hosted agent',
    description:
      'Makes a new agent that Agentry runs (its key is made and kept here), with its code when given. It is stopped until started.',
    input: CreateHostedAgentArgs,
    writes: true,
    async run({ args, principal, services }) {
      const { hosting } = services;
      const created = await hosting.create(principal.userId, {
        name: args.name,
        ...(args.network !== undefined && { network: args.network }),
        ...(args.readme !== undefined && { readme: args.readme }),
      });
      const code = codeText(args);
      if (code !== undefined) await hosting.setCode(principal.userId, created.address, code);
      return structured({ ...agentV1View(await hosting.get(principal.userId, created.address)) });
    },
  }),

  tool({
    name: 'put_hosted_agent_code',
    title: 'Put a hosted agent’s code',
    description:
      'Replaces a hosted agent’s code (agent.py, or its files). A running agent runs the new code after a restart.',
    input: PutHostedCodeArgs,
    writes: true,
    about: byAddress,
    async run({ args, principal, services }) {
      const code = codeText(args);
      if (code === undefined) throw new ToolRefusal('Give the code, or the files', {});
      const digest = await services.hosting.setCode(principal.userId, args.address, code);
      return structured({ address: args.address, digest });
    },
  }),

  tool({
    name: 'set_hosted_agent_secret',
    title: 'Set a hosted agent’s secret',
    description:
      'Sets a secret a hosted agent reads as an environment variable of that name. The value is never shown again.',
    input: SetHostedSecretArgs,
    writes: true,
    about: byAddress,
    async run({ args, principal, services }) {
      const secret = await services.hosting.putSecret(principal.userId, {
        address: args.address,
        name: args.name,
        secret: args.secret,
      });
      return structured({ ...secretView(secret) });
    },
  }),

  tool({
    name: 'start_hosted_agent',
    title: 'Start a hosted agent',
    description:
      'Starts a hosted agent and waits (up to wait_seconds) until it runs, telling how it goes. Answers its state; a start that fails says why.',
    input: StartHostedAgentArgs,
    writes: true,
    about: byAddress,
    async run({ args, principal, services, progress, signal }) {
      const { hosting } = services;
      let agent = await hosting.start(principal.userId, args.address);
      const deadline = Date.now() + (args.wait_seconds ?? 20) * 1000;
      let told = agent.state;
      progress(`${agent.name} is ${agent.state}`);
      while (agent.state !== 'running' && Date.now() < deadline && !signal.aborted) {
        if (agent.state === 'failed' || agent.state === 'crashed') break;
        await new Promise((resolve) => setTimeout(resolve, START_LOOK_MS));
        agent = await hosting.get(principal.userId, args.address);
        if (agent.state !== told) {
          told = agent.state;
          progress(`${agent.name} is ${agent.state}`);
        }
      }
      const view = agentV1View(agent);
      if (agent.state === 'failed' || agent.state === 'crashed') {
        throw new ToolRefusal(`${agent.name} did not start: ${agent.stateReason ?? agent.state}`, {
          ...view,
        });
      }
      return structured({ ...view });
    },
  }),

  tool({
    name: 'stop_hosted_agent',
    title: 'Stop a hosted agent',
    description: 'Stops a hosted agent (it runs its shutdown handlers first).',
    input: HostedAgentArgs,
    writes: true,
    about: byAddress,
    async run({ args, principal, services }) {
      return structured({
        ...agentV1View(await services.hosting.stop(principal.userId, args.address)),
      });
    },
  }),

  tool({
    name: 'read_hosted_agent_logs',
    title: 'Read a hosted agent’s logs',
    description:
      'The latest lines a hosted agent logged, oldest first, each with its level (debg, info, warn, erro).',
    input: HostedLogsArgs,
    writes: false,
    about: byAddress,
    async run({ args, principal, services }) {
      const least = LEVEL_ORDER.get(args.level ?? 'trce') ?? 0;
      const lines = (await services.hosting.latestLogs(principal.userId, args.address))
        .map(agentLogView)
        .filter((line) => (LEVEL_ORDER.get(line.log_level) ?? 0) >= least);
      return {
        structured: { lines },
        text: lines
          .map((line) => `${line.log_timestamp} ${line.log_level} ${line.log_entry}`)
          .join('\n'),
      };
    },
  }),
];

/**
 * A tool call that cannot be done, for a reason the caller can act on: answered as a tool error
 * (`isError`) with the reason in words and, where there is one, what the call came to.
 */
export class ToolRefusal extends Error {
  constructor(
    message: string,
    readonly structured: Record<string, unknown>,
  ) {
    super(message);
  }
}
