import type { ProbesInfo } from '../services/probes.js';
import { isoTimestamp } from '../wire/common.js';
import type { AgentProbes } from '../wire/probes.js';

/** An agent's health as its owner sees it. */
export function probesView({ address, row, successRate }: ProbesInfo): AgentProbes {
  const at = (ms: number | null | undefined) => (ms == null ? null : isoTimestamp(ms));
  return {
    address,
    enabled: row !== undefined,
    interval_seconds: row?.interval_seconds ?? null,
    healthy: row?.healthy == null ? null : row.healthy === 1,
    unanswered: row?.failures ?? 0,
    waiting: row?.probe_msg_id != null,
    last_probe_at: at(row?.last_probe_at),
    last_answered_at: at(row?.last_answered_at),
    last_latency_ms: row?.last_latency_ms ?? null,
    last_failure: row?.last_failure ?? null,
    next_probe_at: at(row?.next_probe_at),
    success_rate: successRate,
  };
}
