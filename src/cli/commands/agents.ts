import { readFileSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import { teamAccountName } from '../../services/teams.js';
import { SEED_PATTERN } from '../../wire/enrolments.js';
import { formatTime, withServices, withStoreOptions } from '../common.js';

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

/**
 * `agentry agents [--user NAME]`: the registered agents, by address, with their owner and
 * status (docs/activity.md, "Status"): one tab-separated line an agent, or JSON.
 */
export function addAgentsCommand(program: Command): void {
  const agents = withStoreOptions(
    program
      .command('agents')
      .description('the registered agents: address, name, owner, status, last seen')
      .option('--user <name>', "only this user's agents")
      .option('--team <slug>', "only this team's agents")
      .option('--json', 'one JSON object an agent instead of a line of text'),
  ).action(async (flags) => {
    await withServices(flags, async (ctx) => {
      const owner = flags.team === undefined ? flags.user : teamAccountName(flags.team as string);
      const userId =
        owner === undefined ? undefined : (await ctx.services.users.findUser(owner as string)).id;
      let after = '';
      for (;;) {
        const page = await ctx.store.repos.agents.listWithOwners(userId, after, PAGE);
        const statuses = await ctx.services.activity.statuses(page.map((agent) => agent.address));
        for (const agent of page) {
          const { status, reason, lastSeen } = statuses.get(agent.address)!;
          if (flags.json) {
            console.log(
              JSON.stringify({
                address: agent.address,
                name: agent.name,
                owner: agent.owner,
                status,
                reason,
                last_seen: lastSeen === null ? null : new Date(lastSeen).toISOString(),
              }),
            );
          } else {
            console.log(
              [agent.address, agent.name || '-', agent.owner, status, formatTime(lastSeen)].join(
                '\t',
              ),
            );
          }
        }
        if (page.length < PAGE) return;
        after = page[page.length - 1]!.address;
      }
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
  ).action(async (user: string, _flags, command: Command) => {
    // The store options given after the subcommand are parsed as the `agents` command's.
    const flags = command.optsWithGlobals();
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
    agents.command('enrolments <user>').description('list the agents a user enrolled'),
  ).action(async (user: string, _flags, command: Command) => {
    const flags = command.optsWithGlobals();
    await withServices(flags, async (ctx) => {
      const owner = await ctx.services.users.findUser(user);
      console.log('address\tname\thandle\tenrolled');
      for (let offset = 0; ; offset += PAGE) {
        const page = await ctx.services.enrolments.list(owner.id, PAGE, offset);
        for (const e of page) {
          console.log([e.address, e.name, e.handle, formatTime(e.createdAt)].join('\t'));
        }
        if (page.length < PAGE) return;
      }
    });
  });
}
