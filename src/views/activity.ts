import { cursorId, kindOf } from './timeline.js';
import type { ActivityStatsRows, TimelineRow } from '../store/repositories/activity.js';
import type { ActivityStats, StatsBucket, TimelineEntry, TimelineKind } from '../wire/activity.js';
import { isoTimestamp } from '../wire/common.js';

function short(address: string | null): string {
  return address === null ? 'an unknown sender' : `${address.slice(0, 12)}…${address.slice(-6)}`;
}

/** One line a person reads, for rows that do not carry their own. */
function summaryOf(kind: TimelineKind, row: TimelineRow): string {
  const from = short(row.peer);
  switch (kind) {
    case 'message.submitted':
      return row.detail
        ? `message from ${from} not stored: ${row.detail}`
        : `message from ${from} submitted`;
    case 'message.stored':
      // A pending message: its row until it leaves the mailbox.
      return row.detail
        ? `message from ${from} ${row.detail} (${row.size ?? 0} bytes)`
        : `message from ${from} stored (${row.size ?? 0} bytes)`;
    case 'message.refused':
      return `message from ${from} refused: ${row.detail ?? 'no reason given'}`;
    case 'message.polled':
      return row.detail === 'agent'
        ? 'message handed to the agent'
        : `message read by its ${row.detail ?? 'owner'}`;
    case 'message.deleted':
      return `message from ${from} delivered: the agent acknowledged it`;
    case 'message.expired':
      return `message from ${from} expired unread`;
    case 'message.quarantined':
      return `message from ${from} quarantined: ${row.detail ?? ''}`;
    case 'message.forwarded':
      // An external A2A agent's call says where it went (docs/a2a.md).
      return row.detail?.startsWith('message/send ')
        ? `${row.detail} (${row.status_code}, ${row.latency_ms ?? 0} ms)`
        : `message forwarded (${row.status_code}, ${row.latency_ms ?? 0} ms)`;
    case 'message.forward_failed':
      return `forward failed: ${row.detail ?? `status ${row.status_code}`}`;
    case 'message.delivered':
      // A kept message's row says nothing; an external A2A agent's says where it went.
      return row.detail
        ? `message from ${from} delivered ${row.detail}`
        : `message from ${from} delivered: kept, then forwarded to the agent`;
    case 'interaction':
      return `reported an interaction (${row.detail ?? ''})`;
    default:
      return row.message ?? kind;
  }
}

/** A timeline row as the API shows it. */
export function timelineEntry(row: TimelineRow): TimelineEntry {
  const kind = kindOf(row);
  return {
    id: cursorId(row),
    address: row.address,
    at: isoTimestamp(row.at),
    kind,
    summary: summaryOf(kind, row),
    peer: row.peer,
    uuid: row.uuid,
    session: row.session,
    category: row.category,
    status_code: row.status_code,
    latency_ms: row.latency_ms,
    size: row.size,
    detail: row.detail,
    data: row.data === null ? null : (JSON.parse(row.data) as Record<string, unknown>),
  };
}

/** An agent's stats as the API shows them. */
export function activityStats(bucket: StatsBucket, stats: ActivityStatsRows): ActivityStats {
  return {
    bucket,
    since: isoTimestamp(stats.since),
    until: isoTimestamp(stats.until),
    buckets: stats.buckets.map(({ start, ...counts }) => ({
      start: isoTimestamp(start),
      ...counts,
    })),
  };
}
