import type { Command } from 'commander';
import type { ProbesInfo } from '../../services/probes.js';
import { probesView } from '../../views/probes.js';
import { checkedAgentAddress, positive, withServices, withStoreOptions } from '../common.js';

/** What the probes found, as `agents show` prints a record: a field a line, or the API's JSON. */
function printProbes(info: ProbesInfo, json: boolean): void {
  const shown = probesView(info);
  if (json) {
    console.log(JSON.stringify(shown));
    return;
  }
  for (const [field, value] of Object.entries(shown)) {
    console.log(`${field.padEnd(18)}${value === null ? '-' : String(value)}`);
  }
}

/**
 * `agentry probes show|set|off ADDRESS`: the health probes of any user's agent, as the operator
 * (docs/activity.md, "Health"): what they found, probing every N seconds, or no more.
 */
export function addProbesCommand(program: Command): void {
  const probes = program
    .command('probes')
    .description("an agent's health probes: show what they found, set their interval, turn off");

  withStoreOptions(
    probes
      .command('show <address>')
      .description('what the probes of an agent found: healthy, unanswered in a row, latency, rate')
      .option('--json', "the API's JSON object instead of a field a line"),
  ).action(async (address: string, flags) => {
    const agent = checkedAgentAddress(address);
    await withServices(flags, async (ctx) => {
      printProbes(await ctx.services.probes.getAsOperator(agent), Boolean(flags.json));
    });
  });

  withStoreOptions(
    probes
      .command('set <address>')
      .description('probe an agent every N seconds (5 to 86400); the first probe goes at once')
      .requiredOption('--interval <seconds>', 'seconds between two probes', positive)
      .option('--json', "the API's JSON object instead of a field a line"),
  ).action(async (address: string, flags) => {
    const agent = checkedAgentAddress(address);
    await withServices(flags, async (ctx) => {
      const info = await ctx.services.probes.enableAsOperator(agent, flags.interval as number);
      printProbes(info, Boolean(flags.json));
    });
  });

  withStoreOptions(
    probes
      .command('off <address>')
      .description('stop probing an agent, and forget what the probes found'),
  ).action(async (address: string, flags) => {
    const agent = checkedAgentAddress(address);
    await withServices(flags, async (ctx) => {
      await ctx.services.probes.disableAsOperator(agent);
      console.error(`no more probes of ${agent}`);
    });
  });
}
