import { Option, type Command } from 'commander';
import { DELIVERY_EVENTS } from '../../wire/deliveries.js';
import {
  checkedAgentAddress,
  formatTime,
  isoTime,
  moment,
  positive,
  printRows,
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
      .option('--limit <n>', 'most events shown (default 100)', positive)
      .option('--json', 'one JSON object a line instead of a table'),
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
      printRows(
        rows,
        [
          { header: 'time', cell: (r) => formatTime(Number(r.at)) },
          { header: 'event', cell: (r) => r.event },
          { header: 'uuid', cell: (r) => r.uuid },
          { header: 'sender', cell: (r) => r.sender },
          { header: 'size', cell: (r) => r.size },
          { header: 'status', cell: (r) => r.status_code },
          { header: 'ms', cell: (r) => r.latency_ms },
          { header: 'detail', cell: (r) => r.detail },
        ],
        {
          json: Boolean(flags.json),
          none: `no delivery events for ${agent}`,
          toJson: (r) => ({
            at: isoTime(Number(r.at)),
            event: r.event,
            uuid: r.uuid,
            sender: r.sender,
            size: r.size === null ? null : Number(r.size),
            status_code: r.status_code,
            latency_ms: r.latency_ms === null ? null : Number(r.latency_ms),
            detail: r.detail,
          }),
        },
      );
    });
  });
}
