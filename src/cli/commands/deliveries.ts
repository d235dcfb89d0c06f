import { Option, type Command } from 'commander';
import { DELIVERY_EVENTS } from '../../wire/deliveries.js';
import {
  checkedAgentAddress,
  formatTime,
  moment,
  positive,
  withServices,
  withStoreOptions,
} from '../common.js';

/** `agentry deliveries ADDRESS`: any agent's delivery trace, one tab-separated line an event. */
export function addDeliveriesCommand(program: Command): void {
  withStoreOptions(
    program
      .command('deliveries <address>')
      .description(
        "an agent's delivery trace, oldest first (time, event, uuid, sender, size, status, ms, detail)",
      )
      .option('--since <time>', 'only events at or after this moment (ISO-8601)')
      .addOption(
        new Option('--status <event>', 'only events of this kind').choices(DELIVERY_EVENTS),
      )
      .option('--limit <n>', 'most events shown (default 100)', positive),
  ).action(async (address: string, flags) => {
    const agent = checkedAgentAddress(address);
    const since = flags.since === undefined ? undefined : moment(flags.since as string);
    await withServices(flags, async (ctx) => {
      const rows = await ctx.services.deliveries.listAsOperator(agent, {
        ...(since !== undefined ? { since } : {}),
        ...(flags.status ? { events: [flags.status as string] } : {}),
        limit: (flags.limit as number | undefined) ?? 100,
        offset: 0,
      });
      const cell = (value: unknown): string => (value == null ? '-' : String(value));
      for (const row of rows) {
        console.log(
          [
            formatTime(Number(row.at)),
            row.event,
            row.uuid,
            row.sender,
            row.size,
            row.status_code,
            row.latency_ms,
            row.detail,
          ]
            .map(cell)
            .join('\t'),
        );
      }
    });
  });
}
