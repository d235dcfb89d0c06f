/** Calls to Agentry's own API from its pages: the session cookie, JSON, `{detail}` errors. */

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

interface ValidationItem {
  loc?: unknown[];
  msg?: string;
}

/** The readable text of an error body: `detail` as a string, or its validation items. */
export function detailOf(body: unknown): string | undefined {
  if (!body || typeof body !== 'object') return undefined;
  const detail = (body as { detail?: unknown }).detail;
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((item: ValidationItem) => `${(item.loc ?? []).slice(1).join('.')}: ${item.msg ?? ''}`)
      .join('; ');
  }
  return undefined;
}

/** An answer's body as JSON; undefined when it is empty or not JSON. */
export async function jsonOf(res: Response): Promise<unknown> {
  const text = await res.text();
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

type SessionEnded = (reason: string) => void;
let sessionEnded: SessionEnded | undefined;

/**
 * Who is told when a call is answered 401 while the page believes it is signed in: the
 * session ended under it (expired, signed out elsewhere, its key revoked). The session's own
 * calls are left out: there a 401 means "not signed in" or "wrong key".
 */
export function onSessionEnded(handler: SessionEnded | undefined): void {
  sessionEnded = handler;
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { 'x-agentry-csrf': '1' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers,
    body: body === undefined ? null : JSON.stringify(body),
  });
  const data = await jsonOf(res);
  if (!res.ok) {
    const error = new ApiError(res.status, detailOf(data) ?? `HTTP ${res.status}`);
    if (res.status === 401 && path !== '/v2/session') sessionEnded?.(error.message);
    throw error;
  }
  return data as T;
}

// Answers have the server's own wire types (type-only: nothing of the server is bundled).
import type { AgentRecord } from '../../src/wire/agents';
export type { AgentRecord };
export type { ApiKey, NewApiKey } from '../../src/wire/keys';
export type { Enrolment, ProvisionedAgent } from '../../src/wire/enrolments';
export type { SessionInfo } from '../../src/wire/sessions';
export type { AlmanacAgent } from '../../src/wire/almanac';
export type { DeliveryEventView } from '../../src/wire/deliveries';
export type { Domain as DomainRecord } from '../../src/wire/domains';
export type { StoredEnvelope } from '../../src/wire/mailbox';
export type { UsagePeriod, UsageReport } from '../../src/wire/usage';
export type {
  ActivityStats,
  AgentStatus,
  AgentStatusName,
  StatsBucket,
  StatsBucketCounts,
  TimelineEntry,
  TimelinePage,
} from '../../src/wire/activity';

export const encode = encodeURIComponent;

/** How an agent is reached: by its proxy when it has a forward URL, else by its mailbox. */
export function connection(agent: AgentRecord): string {
  return agent.redirect_url ? `proxy → ${agent.redirect_url}` : 'mailbox';
}

export function when(iso: string | null): string {
  if (!iso) return '—';
  return new Date(iso).toLocaleString();
}

/** How long ago, in words ("just now", "5 min ago", "3 h ago", "2 days ago"). */
export function ago(iso: string, now = Date.now()): string {
  const seconds = Math.round((now - Date.parse(iso)) / 1000);
  if (seconds < 45) return 'just now';
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 48) return `${hours} h ago`;
  return `${Math.round(hours / 24)} days ago`;
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let unit = 'B';
  for (const u of units) {
    if (v < 1024) break;
    v /= 1024;
    unit = u;
  }
  return `${v.toFixed(1)} ${unit}`;
}
