import type { Command } from 'commander';
import { formatTime, withServices, withStoreOptions } from '../common.js';

/** Agents read a page at a time, their statuses with them. */
const PAGE = 500;

/**
 * `agentry agents [--user NAME]`: the registered agents, by address, with their owner and
 * status (docs/activity.md, "Status"): one tab-separated line an agent, or JSON.
 */
export function addAgentsCommand(program: Command): void {
  withStoreOptions(
    program
      .command('agents')
      .description('the registered agents: address, name, owner, status, last seen')
      .option('--user <name>', "only this user's agents")
      .option('--json', 'one JSON object an agent instead of a line of text'),
  ).action(async (flags) => {
    await withServices(flags, async (ctx) => {
      const userId =
        flags.user === undefined
          ? undefined
          : (await ctx.services.users.findUser(flags.user as string)).id;
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
}
