import type { Command } from 'commander';
import { timelineEntry } from '../../views/activity.js';
import { cursorId } from '../../services/activity/index.js';
import type { TimelineCursor, TimelineRow } from '../../store/repositories/activity.js';
import {
  checkedAgentAddress,
  moment,
  positive,
  withServices,
  withStoreOptions,
} from '../common.js';

/** How often `--follow` reads the store. */
const FOLLOW_INTERVAL_MS = 1000;
/**
 * How far behind the newest entry printed `--follow` reads again: a row is dated when it is
 * written and may commit a moment later (docs/activity.md, "Live").
 */
const FOLLOW_GRACE_MS = 2000;
/** Rows one read of `--follow` takes; more are read at once after. */
const FOLLOW_PAGE = 500;

/** One entry as a line: readable (time, kind, summary), or the API's JSON entry. */
function formatEntry(row: TimelineRow, json: boolean): string {
  const entry = timelineEntry(row);
  if (json) return JSON.stringify(entry);
  return `${new Date(row.at).toISOString()}  ${entry.kind.padEnd(22)}  ${entry.summary}`;
}

/**
 * `agentry activity ADDRESS`: any agent's timeline for the operator, newest last; with
 * `--follow`, new entries as they are written, until SIGINT or SIGTERM.
 */
export function addActivityCommand(program: Command): void {
  addTimelineCommand(program, 'activity');
}

/** The timeline command, as `agentry activity` and as `agentry agents timeline`. */
export function addTimelineCommand(parent: Command, name: string): void {
  withStoreOptions(
    parent
      .command(`${name} <address>`)
      .description(
        "an agent's timeline (delivery trace, reported events, registrations, status), newest last: time, kind, summary",
      )
      .option('--kind <kinds>', 'only these kinds or groups, comma-separated (as the API takes)')
      .option('--since <time>', 'only entries at or after this moment (ISO-8601)')
      .option('--limit <n>', 'the newest N entries (default 100)', positive)
      .option('--follow', 'keep printing new entries as they come (until Ctrl-C)')
      .option('--json', 'one JSON object an entry (the API’s entry) instead of a line of text'),
  ).action(async (address: string, flags) => {
    const agent = checkedAgentAddress(address);
    const since = flags.since === undefined ? undefined : moment(flags.since as string);
    const kind = flags.kind as string | undefined;
    const json = (flags.json as boolean | undefined) ?? false;
    const print = (row: TimelineRow): void => {
      process.stdout.write(`${formatEntry(row, json)}\n`);
    };
    await withServices(flags, async (ctx) => {
      const { activity } = ctx.services;
      const newest = await activity.timelineAsOperator(agent, {
        ...(kind !== undefined ? { kind } : {}),
        ...(since !== undefined ? { since } : {}),
        limit: (flags.limit as number | undefined) ?? 100,
      });
      const rows = newest.reverse();
      rows.forEach(print);
      if (!flags.follow) return;
      await follow(
        (after) =>
          activity.timelineAsOperator(agent, {
            ...(kind !== undefined ? { kind } : {}),
            ...(since !== undefined ? { since } : {}),
            after,
            limit: FOLLOW_PAGE,
          }),
        rows,
        print,
      );
    });
  });
}

/**
 * Reads what came after the entries printed, every {@link FOLLOW_INTERVAL_MS}, and prints
 * what it has not printed, until SIGINT or SIGTERM. It reads from a place
 * {@link FOLLOW_GRACE_MS} behind the newest entry printed, so that a row that commits after
 * rows dated later is still printed, once.
 */
async function follow(
  read: (after: TimelineCursor) => Promise<TimelineRow[]>,
  printed: TimelineRow[],
  print: (row: TimelineRow) => void,
): Promise<void> {
  let stopped = false;
  let wake: (() => void) | undefined;
  const stop = (): void => {
    stopped = true;
    wake?.();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  // Entries printed within the grace, by id, with the place they were printed at.
  const recent = printed.map((row) => ({ id: cursorId(row), row }));
  let safe: TimelineCursor = { at: 0, source: 'a', id: 0 };
  const settle = (): void => {
    const newest = recent.length > 0 ? recent[recent.length - 1]!.row.at : 0;
    while (recent.length > 0 && recent[0]!.row.at < newest - FOLLOW_GRACE_MS) {
      const { row } = recent.shift()!;
      safe = { at: row.at, source: row.source, id: row.id };
    }
  };
  settle();
  try {
    while (!stopped) {
      let after = safe;
      for (;;) {
        const rows = await read(after);
        const seen = new Set(recent.map((entry) => entry.id));
        for (const row of rows) {
          const id = cursorId(row);
          if (seen.has(id)) continue;
          print(row);
          recent.push({ id, row });
        }
        if (rows.length < FOLLOW_PAGE || stopped) break;
        const last = rows[rows.length - 1]!;
        after = { at: last.at, source: last.source, id: last.id };
      }
      recent.sort(
        (a, b) =>
          a.row.at - b.row.at || a.row.source.localeCompare(b.row.source) || a.row.id - b.row.id,
      );
      settle();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, FOLLOW_INTERVAL_MS);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  } finally {
    process.removeListener('SIGINT', stop);
    process.removeListener('SIGTERM', stop);
  }
}
