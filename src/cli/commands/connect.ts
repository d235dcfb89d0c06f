import type { Command } from 'commander';
import { isAgentAddress } from '../../crypto/index.js';
import { withServices, withStoreOptions, type StoreFlags } from '../common.js';

/** A local agent that cannot be reached or refuses, or a connect asked for wrongly. */
export class ConnectError extends Error {}

/** `agentry connect`: connects a running uAgent, as the web inspector does. */
export function addConnectCommand(program: Command): void {
  withStoreOptions(
    program
      .command('connect')
      .description('connect a running uAgent to this Agentry, as the web inspector does')
      .requiredOption('--agent <url>', "the agent's local server, e.g. http://127.0.0.1:8001")
      .requiredOption('--user <user>', 'the user that will own the agent')
      .option('--team <slug>', "connect it for this team of the user's (x-team), not the user")
      .option('--mailbox', 'Agentry keeps its messages until it collects them')
      .option('--proxy <endpoint>', "Agentry forwards messages to the agent's public endpoint"),
  ).action(async (flags) => {
    if (Boolean(flags.mailbox) === Boolean(flags.proxy)) {
      throw new ConnectError('give either --mailbox or --proxy ENDPOINT');
    }
    await connectAgent(
      flags,
      flags.proxy ? { agent_type: 'proxy', endpoint: flags.proxy } : { agent_type: 'mailbox' },
    );
  });
}

/** `agentry disconnect`: unregisters a running uAgent. */
export function addDisconnectCommand(program: Command): void {
  withStoreOptions(
    program
      .command('disconnect')
      .description('unregister a running uAgent from this Agentry')
      .requiredOption('--agent <url>', "the agent's local server, e.g. http://127.0.0.1:8001")
      .requiredOption('--user <user>', 'the user that owns the agent')
      .option('--team <slug>', "the user's team that owns it (x-team)"),
  ).action(async (flags) => {
    await connectAgent(flags, {});
  });
}

/**
 * Connects or disconnects a running uAgent as the inspector does: mints a key for the user
 * that lives five minutes and is limited to that agent, hands it to the agent's `/connect` or `/disconnect`, and revokes it.
 */
async function connectAgent(
  flags: StoreFlags & { agent: string; user: string; team?: string },
  request: { agent_type?: 'mailbox' | 'proxy'; endpoint?: string },
): Promise<void> {
  const agent = flags.agent.replace(/\/+$/, '');
  const info = (await callLocalAgent(agent, '/agent_info')) as { address?: string };
  const action = request.agent_type ? 'connect' : 'disconnect';
  await withServices(flags, async (ctx) => {
    const user = await ctx.services.users.findUser(flags.user);
    // Refused here with the same words the agent would bring back.
    if (flags.team) await ctx.services.teams.actAs(user.id, flags.team);
    if (!info.address || !isAgentAddress(info.address)) {
      throw new ConnectError(`the agent at ${agent} did not say its address (/agent_info)`);
    }
    // Limited to this one agent: the agent holding it can do nothing else with it.
    const key = await ctx.services.keys.createKey(user.id, {
      label: `${action} ${info.address}`,
      lifetimeMs: 300_000,
      addresses: [info.address.toLowerCase()],
    });
    let answer: { success?: boolean; detail?: string | null };
    try {
      answer = (await callLocalAgent(agent, `/${action}`, {
        user_token: key.token,
        ...request,
        // The agent sends it as x-team: the agent is registered for the team.
        ...(flags.team ? { team: flags.team } : {}),
      })) as typeof answer;
    } finally {
      await ctx.services.keys.revokeKey(key.id, user.id);
    }
    if (!answer?.success) {
      throw new ConnectError(
        `the agent could not ${action}: ${answer?.detail ?? 'no reason given'} (is it configured to use this Agentry?)`,
      );
    }
    console.log(
      action === 'connect'
        ? `connected ${info.address} as a ${request.agent_type} agent of ${flags.team ? `team ${flags.team}` : user.name}`
        : `disconnected ${info.address}`,
    );
  });
}

/** The answer of a local uAgent's inspector endpoint, or an error saying what went wrong. */
async function callLocalAgent(agent: string, path: string, body?: unknown): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(`${agent}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? null : JSON.stringify(body),
      signal: AbortSignal.timeout(60_000),
    });
  } catch {
    throw new ConnectError(`the agent at ${agent} does not answer: is it running?`);
  }
  const text = await res.text();
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    data = text;
  }
  if (!res.ok) throw new ConnectError(`the agent at ${agent} answered ${res.status}: ${text}`);
  return data;
}
