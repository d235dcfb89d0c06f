// The inspector's side of a uAgent running on this machine: which agent the link names, and
// the calls its local server answers (`/agent_info`, `/messages`, `/connect`, `/disconnect`).

import { api, detailOf, jsonOf, type NewApiKey } from './api';

/** What a uAgent's own `/agent_info` says about it. */
export interface LocalAgentInfo {
  address: string;
  prefix?: string;
  endpoints?: { url: string; weight?: number }[];
  protocols?: string[];
  metadata?: Record<string, unknown> | null;
  agent_type?: string;
  port?: number;
}

export interface HistoryEntry {
  timestamp?: number;
  sender?: string;
  target?: string;
  schema_digest?: string;
}

/** The agent at the link's URL: another than the link names, or it, with its recent messages. */
export type LocalAgent =
  | { state: 'mismatch'; info: LocalAgentInfo }
  | { state: 'ok'; info: LocalAgentInfo; history: HistoryEntry[] | undefined };

/** What the agent answers to `/connect` and `/disconnect`. */
export interface AgentAnswer {
  success?: boolean;
  detail?: string | null;
}

/** Loopback hosts: a uAgent's server takes `/connect` from its own machine only. */
function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127(\.\d{1,3}){3}$/.test(hostname);
}

/**
 * The agent the page's link names: its local URL when that is on this machine, `remote` when
 * the link names another machine, and its address.
 */
export function linkParams(): {
  uri: string | undefined;
  remote: string | undefined;
  address: string;
} {
  const search = new URLSearchParams(location.search);
  const raw = (search.get('uri') ?? '').trim();
  let uri: string | undefined;
  let remote: string | undefined;
  try {
    const url = new URL(raw);
    if (url.protocol === 'http:' || url.protocol === 'https:') {
      // A link naming another machine could send the key minted for Connect anywhere.
      if (isLoopback(url.hostname)) uri = raw.replace(/\/+$/, '');
      else remote = raw;
    }
  } catch {
    uri = undefined;
  }
  return { uri, remote, address: (search.get('address') ?? '').trim() };
}

/** One call to the agent's local server; a failure is a sentence saying what is wrong. */
async function localCall<T>(uri: string, path: string, body?: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(`${uri}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      mode: 'cors',
      credentials: 'omit',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? null : JSON.stringify(body),
    });
  } catch {
    throw new Error(
      `The agent at ${uri} does not answer. Is it running, with its inspector enabled? Start it and reload this page.`,
    );
  }
  const data = await jsonOf(res);
  if (!res.ok) {
    const error = (data as { error?: unknown } | undefined)?.error;
    const reason = detailOf(data) ?? (typeof error === 'string' ? error : `HTTP ${res.status}`);
    throw new Error(`The agent at ${uri} answered ${res.status}: ${reason}`);
  }
  return data as T;
}

/** Asks the agent at `uri` who it is and, when it is `address`, what it received lately. */
export async function probeAgent(uri: string, address: string): Promise<LocalAgent> {
  const info = await localCall<LocalAgentInfo>(uri, '/agent_info');
  if (info.address !== address) return { state: 'mismatch', info };
  const history = await localCall<{ envelopes?: HistoryEntry[] } | null>(uri, '/messages').then(
    (h) => h?.envelopes,
    () => undefined,
  );
  return { state: 'ok', info, history };
}

/** This service's submit URLs, v2 and v1 (uAgents 0.22 advertises `/v1/…`): not the agent's own. */
const AGENTRY_SUBMIT = /\/v2\/agents\/|\/v1\/(proxy\/)?submit\/?$/;

/** The endpoint a proxy connection offers first: the agent's own, else its `/submit`. */
export function defaultEndpoint(uri: string, info: LocalAgentInfo): string {
  const own = info.endpoints?.find((e) => !AGENTRY_SUBMIT.test(e.url));
  return own?.url ?? `${uri}/submit`;
}

/**
 * Asks the agent to connect to Agentry (as a mailbox, or as a proxy with `endpoint`) or to
 * disconnect, with a key minted for this one call, limited to this agent, and revoked straight
 * after.
 */
export async function askAgent(
  uri: string,
  address: string,
  kind: 'connect' | 'disconnect',
  mode: 'mailbox' | 'proxy',
  endpoint: string,
): Promise<AgentAnswer> {
  // Limited to this one agent: the agent holding it can do nothing else with it.
  const key = await api<NewApiKey>('POST', '/v2/api-keys', {
    label: `${kind} ${address}`,
    expires_in_seconds: 300,
    addresses: [address],
  });
  try {
    return await (kind === 'connect'
      ? localCall<AgentAnswer>(uri, '/connect', {
          user_token: key.key,
          agent_type: mode,
          ...(mode === 'proxy' ? { endpoint } : {}),
        })
      : localCall<AgentAnswer>(uri, '/disconnect', { user_token: key.key }));
  } finally {
    await api('DELETE', `/v2/api-keys/${key.id}`).catch(() => undefined);
  }
}
