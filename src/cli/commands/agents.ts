import { readFileSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import { NotFoundError } from '../../errors.js';
import { teamAccountName } from '../../services/teams.js';
import { SEED_PATTERN } from '../../wire/enrolments.js';
import {
  checkedAgentAddress,
  formatTime,
  isoTime,
  positive,
  printRows,
  withJsonOption,
  withServices,
  withStoreOptions,
} from '../common.js';
import { addTimelineCommand } from './activity.js';

const HANDLE_PATTERN = /^[a-z0-9]+(-[a-z0-9]+)*$/;

function agentName(value: string): string {
  if (value.length < 1 || value.length > 32) {
    throw new InvalidArgumentError('the name must be 1 to 32 characters');
  }
  return value;
}

function agentHandle(value: string): string {
  if (value.length > 40 || !HANDLE_PATTERN.test(value)) {
    throw new InvalidArgumentError(
      'a handle is up to 40 lower-case letters and digits in dash-separated words',
    );
  }
  return value;
}

/** Agents read a page at a time, their statuses with them. */
const PAGE = 500;

/** Where an envelope's sender is, without reading the rest of it. */
function senderOf(envelope: string): string | null {
  try {
    return (JSON.parse(envelope) as { sender?: string }).sender ?? null;
  } catch {
    return null;
  }
}

/**
 * `agentry agents list|show|mailbox|timeline`: the registered agents, as the operator sees
 * them (any user's), with their status (docs/activity.md, "Status").
 */
export function addAgentsCommand(program: Command): void {
  const agents = program
    .command('agents')
    .description('the registered agents: list, show one, its mailbox, its timeline');

  withStoreOptions(
    withJsonOption(
      agents
        .command('list')
        .description('every agent by address: address, name, owner, status, last seen')
        .option('--user <name>', "only this user's agents")
        .option('--team <slug>', "only this team's agents"),
    ),
  ).action(async (flags) => {
    const json = Boolean(flags.json);
    await withServices(flags, async (ctx) => {
      const owner = flags.team === undefined ? flags.user : teamAccountName(flags.team as string);
      const userId =
        owner === undefined ? undefined : (await ctx.services.users.findUser(owner as string)).id;
      let after = '';
      for (let first = true; ; first = false) {
        const page = await ctx.services.agents.listAsOperator(userId, after, PAGE);
        const statuses = await ctx.services.activity.statuses(page.map((agent) => agent.address));
        const rows = page.map((agent) => ({ ...agent, ...statuses.get(agent.address)! }));
        if (first || rows.length > 0) {
          printRows(
            rows,
            [
              { header: 'address', cell: (r) => r.address },
              { header: 'name', cell: (r) => r.name },
              { header: 'owner', cell: (r) => r.owner },
              { header: 'status', cell: (r) => r.status },
              { header: 'last_seen', cell: (r) => formatTime(r.lastSeen) },
            ],
            {
              json,
              header: first,
              none: owner === undefined ? 'no agents' : `no agents of ${owner}`,
              toJson: (r) => ({
                address: r.address,
                name: r.name,
                owner: r.owner,
                status: r.status,
                reason: r.reason,
                last_seen: isoTime(r.lastSeen),
              }),
            },
          );
        }
        if (page.length < PAGE) return;
        after = page[page.length - 1]!.address;
      }
    });
  });

  withStoreOptions(
    withJsonOption(
      agents
        .command('show <address>')
        .description("one agent: its listing, owner, status, endpoints and mailbox's size"),
    ),
  ).action(async (address: string, flags) => {
    const canonical = checkedAgentAddress(address);
    await withServices(flags, async (ctx) => {
      const agent = await ctx.services.agents.findAsOperator(canonical);
      if (agent === undefined) {
        throw new NotFoundError(
          `no agent ${canonical} is registered here; "agentry agents list" lists those that are`,
        );
      }
      const owner = (await ctx.services.users.listUsers()).find((u) => u.id === agent.user_id);
      const { status, reason, lastSeen } = (await ctx.services.activity.statuses([canonical])).get(
        canonical,
      )!;
      const shown = {
        address: agent.address,
        name: agent.name,
        handle: agent.handle,
        owner: owner?.name ?? agent.user_id,
        type: agent.agent_type,
        status,
        reason,
        last_seen: isoTime(lastSeen),
        registered: isoTime(agent.registered_at),
        endpoints: agent.endpoints.map((endpoint) => endpoint.url),
        pending_messages: Number(agent.mailbox.pending_messages),
        bytes_stored: Number(agent.mailbox.bytes_stored),
      };
      if (flags.json) {
        console.log(JSON.stringify(shown));
        return;
      }
      for (const [field, value] of Object.entries(shown)) {
        const text = Array.isArray(value) ? value.join(' ') : value;
        console.log(`${field.padEnd(17)}${text === null || text === '' ? '-' : String(text)}`);
      }
    });
  });

  withStoreOptions(
    withJsonOption(
      agents
        .command('mailbox <address>')
        .description(
          "the messages waiting in an agent's mailbox, oldest first: uuid, sender, size, received, expires",
        )
        .option('--limit <n>', 'most messages shown (default 100)', positive),
    ),
  ).action(async (address: string, flags) => {
    const canonical = checkedAgentAddress(address);
    await withServices(flags, async (ctx) => {
      if (!(await ctx.services.agents.isRegistered(canonical))) {
        throw new NotFoundError(
          `no agent ${canonical} is registered here; "agentry agents list" lists those that are`,
        );
      }
      const messages = await ctx.services.mailbox.listPendingAsOperator(canonical, {
        limit: (flags.limit as number | undefined) ?? 100,
        offset: 0,
      });
      printRows(
        messages,
        [
          { header: 'uuid', cell: (m) => m.uuid },
          { header: 'sender', cell: (m) => senderOf(m.envelope) },
          { header: 'size', cell: (m) => m.size },
          { header: 'received', cell: (m) => formatTime(Number(m.received_at)) },
          { header: 'expires', cell: (m) => formatTime(Number(m.expires_at)) },
        ],
        {
          json: Boolean(flags.json),
          none: `no messages wait for ${canonical}`,
          toJson: (m) => ({
            uuid: m.uuid,
            sender: senderOf(m.envelope),
            size: Number(m.size),
            received: isoTime(Number(m.received_at)),
            expires: isoTime(Number(m.expires_at)),
            polled: isoTime(m.polled_at === null ? null : Number(m.polled_at)),
          }),
        },
      );
    });
  });

  withStoreOptions(
    agents
      .command('provision <user>')
      .description(
        "make an agent key (or take one from standard input), enrol its address to the user and print the Agent URI last, once; the URI's host is AGENTRY_PUBLIC_URL's",
      )
      .requiredOption('--name <name>', "the agent's name (1 to 32 characters)", agentName)
      .option('--handle <handle>', 'its handle; made from the name when not given', agentHandle)
      .option('--seed-stdin', 'read the agent key (seed) from standard input instead'),
  ).action(async (user: string, flags) => {
    let seed: string | undefined;
    if (flags.seedStdin) {
      seed = readFileSync(0, 'utf8').trim();
      if (!new RegExp(SEED_PATTERN).test(seed)) {
        throw new InvalidArgumentError(
          "the seed must be 16 to 128 letters, digits, '.', '_', '~' or '-' (an Agent URI carries it as it is)",
        );
      }
    }
    await withServices(flags, async (ctx) => {
      const owner = await ctx.services.users.findUser(user);
      const agent = await ctx.services.enrolments.provision(owner.id, {
        name: flags.name as string,
        ...(flags.handle ? { handle: flags.handle as string } : {}),
        ...(seed ? { seed } : {}),
      });
      console.log(`enrolled ${agent.address} (handle ${agent.handle}) to ${owner.name}`);
      console.log(agent.agentUri);
    });
  });

  withStoreOptions(
    withJsonOption(
      agents
        .command('enrolments <user>')
        .description('the agents a user enrolled: address, name, handle, enrolled'),
    ),
  ).action(async (user: string, flags) => {
    await withServices(flags, async (ctx) => {
      const owner = await ctx.services.users.findUser(user);
      for (let offset = 0; ; offset += PAGE) {
        const page = await ctx.services.enrolments.list(owner.id, PAGE, offset);
        if (offset === 0 || page.length > 0) {
          printRows(
            page,
            [
              { header: 'address', cell: (e) => e.address },
              { header: 'name', cell: (e) => e.name },
              { header: 'handle', cell: (e) => e.handle },
              { header: 'enrolled', cell: (e) => formatTime(e.createdAt) },
            ],
            {
              json: Boolean(flags.json),
              header: offset === 0,
              none: `${owner.name} enrolled no agents`,
              toJson: (e) => ({
                address: e.address,
                name: e.name,
                handle: e.handle,
                enrolled: isoTime(e.createdAt),
              }),
            },
          );
        }
        if (page.length < PAGE) return;
      }
    });
  });

  addTimelineCommand(agents, 'timeline');
}
