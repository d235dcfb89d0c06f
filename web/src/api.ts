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

/** Where the page keeps the team it acts for (only its slug; nothing secret). */
const TEAM_STORAGE = 'agentry.team';
/** The cookie a live stream takes its team from: EventSource cannot send `x-team`. */
const TEAM_COOKIE = 'agentry_team';

/** The team the pages act for (`x-team` on their calls), or undefined for the user's own. */
export function currentTeam(): string | undefined {
  return localStorage.getItem(TEAM_STORAGE) ?? undefined;
}

/** Switches the pages to a team, or back to the user's own things. */
export function setCurrentTeam(slug: string | undefined): void {
  if (slug) {
    localStorage.setItem(TEAM_STORAGE, slug);
    document.cookie = `${TEAM_COOKIE}=${encodeURIComponent(slug)}; path=/; SameSite=Strict`;
  } else {
    localStorage.removeItem(TEAM_STORAGE);
    document.cookie = `${TEAM_COOKIE}=; path=/; max-age=0; SameSite=Strict`;
  }
}

/**
 * Whether a call acts for the current team: every call about owned things does; the session
 * and team administration are about the person, and must work even once the team is gone.
 */
function actsForTeam(path: string): boolean {
  return !path.startsWith('/v2/session') && !path.startsWith('/v2/teams');
}

type TeamLost = (reason: string) => void;
let teamLost: TeamLost | undefined;

/** Who is told when the current team refuses the user (removed, or the team deleted). */
export function onTeamLost(handler: TeamLost | undefined): void {
  teamLost = handler;
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { 'x-agentry-csrf': '1' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const team = currentTeam();
  if (team && actsForTeam(path)) headers['x-team'] = team;
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
    if (res.status === 403 && team && error.message.startsWith('Not a member of a team')) {
      setCurrentTeam(undefined);
      teamLost?.(error.message);
    }
    throw error;
  }
  return data as T;
}

// Answers have the server's own wire types (type-only: nothing of the server is bundled).
import type { AgentRecord } from '../../src/wire/agents';
export type { AgentRecord };
export type { ApiKey, NewApiKey } from '../../src/wire/keys';
export type { McpSession } from '../../src/wire/mcp';
export type { NewWebhook, Webhook, WebhookDelivery } from '../../src/wire/webhooks';
export type { Enrolment, ProvisionedAgent } from '../../src/wire/enrolments';
export type { SessionInfo } from '../../src/wire/sessions';
export type { Team, TeamDetail, TeamMember } from '../../src/wire/teams';
export type { AlmanacAgent } from '../../src/wire/almanac';
import type { ProtocolManifest } from '../../src/wire/almanac';
export type { ChatContent, ChatEntry, ChatSession, SendChatAnswer } from '../../src/wire/chat';
import type { Static } from '@sinclair/typebox';
import type * as hosting from '../../src/wire/hosting';
export type HostedAgent = hosting.AgentV1;
export type HostedAgentSummary = Static<typeof hosting.AgentSummaryV1>;
export type HostedCode = Static<typeof hosting.AgentCode>;
export type HostedLogLine = Static<typeof hosting.AgentLog>;
export type HostedSecret = Static<typeof hosting.Secret>;
export type HostedStateName = (typeof hosting.HOSTED_STATE_NAMES)[number];
export type HostingStatus = Static<typeof hosting.HostingStatus>;
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

/** The names of the agents of whoever the pages act for, read at most every half minute. */
let ownAgents:
  { team: string | undefined; at: number; names: Promise<Map<string, string>> } | undefined;

/**
 * The names of your agents (or those of the team chosen under Acting as) by address, for
 * showing an address that is one of them by its name; agents without a name are left out.
 */
export function ownAgentNames(): Promise<Map<string, string>> {
  const team = currentTeam();
  if (!ownAgents || ownAgents.team !== team || Date.now() - ownAgents.at > 30_000) {
    const names = api<AgentRecord[]>('GET', '/v2/agents?limit=1000').then(
      (agents) => new Map(agents.filter((a) => a.name).map((a) => [a.address, a.name])),
    );
    ownAgents = { team, at: Date.now(), names };
    // A failure is not kept: the next page asks again.
    names.catch(() => {
      if (ownAgents?.names === names) ownAgents = undefined;
    });
  }
  return ownAgents.names;
}

/** The manifests asked for, by digest: a protocol's manifest does not change under its digest. */
const manifests = new Map<string, Promise<ProtocolManifest | undefined>>();

/**
 * The manifest published under a protocol digest (`GET /v1/almanac/manifests/protocols/…`),
 * or undefined when none is known; asked once a page load.
 */
export function protocolManifest(digest: string): Promise<ProtocolManifest | undefined> {
  let found = manifests.get(digest);
  if (!found) {
    found = api<ProtocolManifest>('GET', `/v1/almanac/manifests/protocols/${encode(digest)}`).catch(
      () => undefined,
    );
    manifests.set(digest, found);
  }
  return found;
}

/** How an agent is reached: by its proxy when it has a forward URL, else by its mailbox. */
export function connection(agent: AgentRecord): string {
  return agent.redirect_url ? `proxy → ${agent.redirect_url}` : 'mailbox';
}

/**
 * A moment exactly, the same in every browser and locale: ISO 8601 in UTC, as the server's
 * logs and the activity charts' days count it (`2026-11-28 17:31:04 UTC`).
 */
export function when(iso: string): string {
  return `${new Date(iso).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** A moment's time of day in UTC, `17:31:04` (or `17:31` without the seconds). */
export function clock(iso: string, seconds = true): string {
  return new Date(iso).toISOString().slice(11, seconds ? 19 : 16);
}

/**
 * How long ago, or how long until, in words ("just now", "5 min ago", "3 h ago", "2 days ago",
 * "in 6 days").
 */
export function ago(iso: string, now = Date.now()): string {
  const signed = Math.round((now - Date.parse(iso)) / 1000);
  const seconds = Math.abs(signed);
  if (seconds < 45) return 'just now';
  const minutes = Math.round(seconds / 60);
  const hours = Math.round(minutes / 60);
  const span =
    minutes < 60 ? `${minutes} min` : hours < 48 ? `${hours} h` : `${Math.round(hours / 24)} days`;
  return signed >= 0 ? `${span} ago` : `in ${span}`;
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
