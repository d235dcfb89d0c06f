import type { Command } from 'commander';
import {
  checkedAgentAddress,
  checkedDomainName,
  positive,
  printRows,
  withJsonOption,
  withServices,
  withStoreOptions,
} from '../common.js';

/**
 * `agentry domains add|list|remove`: names and the agents they resolve to, managed as the
 * operator (any user's names).
 */
export function addDomainsCommand(program: Command): void {
  const domains = program
    .command('domains')
    .description('manage names (such as alice.agent) and the agents they resolve to');

  withStoreOptions(
    domains
      .command('add <name> <address>')
      .description(
        "assign an agent to a name, claiming the name for the user when nobody has it; prints the name's agents",
      )
      .requiredOption('--user <user>', 'the user who owns the name (name or id)')
      .option(
        '--weight <n>',
        'how often resolution picks this agent, relative to the others',
        positive,
        1,
      ),
  ).action(async (name: string, address: string, flags) => {
    const domainName = checkedDomainName(name);
    const canonical = checkedAgentAddress(address);
    await withServices(flags, async (ctx) => {
      const user = await ctx.services.users.findUser(flags.user as string);
      const domain = await ctx.services.domains.addAgent(
        { userId: user.id, operator: true },
        domainName,
        { address: canonical, weight: flags.weight as number },
      );
      for (const agent of domain.agents)
        console.log(`${domain.name}\t${agent.address}\t${agent.weight}`);
    });
  });

  withStoreOptions(
    withJsonOption(
      domains
        .command('list')
        .description('list every name, its owner and agents (address:weight, space-separated)'),
    ),
  ).action(async (flags) => {
    await withServices(flags, async (ctx) => {
      const owners = new Map((await ctx.services.users.listUsers()).map((u) => [u.id, u.name]));
      const owner = (userId: string): string => owners.get(userId) ?? userId;
      printRows(
        await ctx.services.domains.list(),
        [
          { header: 'name', cell: (d) => d.name },
          { header: 'owner', cell: (d) => owner(d.user_id) },
          {
            header: 'agents',
            cell: (d) => d.agents.map((agent) => `${agent.address}:${agent.weight}`).join(' '),
          },
        ],
        {
          json: Boolean(flags.json),
          none: 'no names',
          toJson: (d) => ({
            name: d.name,
            owner: owner(d.user_id),
            agents: d.agents.map((agent) => ({ address: agent.address, weight: agent.weight })),
          }),
        },
      );
    });
  });

  withStoreOptions(domains.command('remove <name>').description('release a name')).action(
    async (name: string, flags) => {
      const domainName = checkedDomainName(name);
      await withServices(flags, async (ctx) => {
        await ctx.services.domains.remove({ userId: null, operator: true }, domainName);
        console.log(`removed ${domainName}`);
      });
    },
  );
}
