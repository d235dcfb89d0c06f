import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import {
  api,
  ApiError,
  connection,
  detailOf,
  encode,
  jsonOf,
  when,
  type AgentRecord,
  type NewApiKey,
} from './api';
import { SignIn, useSession } from './session';
import { MonoLines } from './widgets';
import './style.css';

/** What a uAgent's own `/agent_info` says about it. */
interface LocalAgentInfo {
  address: string;
  prefix?: string;
  endpoints?: { url: string; weight?: number }[];
  protocols?: string[];
  metadata?: Record<string, unknown> | null;
  agent_type?: string;
  port?: number;
}

interface HistoryEntry {
  timestamp?: number;
  sender?: string;
  target?: string;
  schema_digest?: string;
}

type Local =
  | { state: 'loading' }
  | { state: 'unreachable'; message: string }
  | { state: 'mismatch'; info: LocalAgentInfo }
  | { state: 'ok'; info: LocalAgentInfo; history: HistoryEntry[] | undefined };

type Known =
  | { state: 'loading' }
  | { state: 'unknown' }
  | { state: 'known'; agent: AgentRecord }
  | { state: 'error'; message: string };

/** Loopback hosts: a uAgent's server takes `/connect` from its own machine only. */
function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127(\.\d{1,3}){3}$/.test(hostname);
}

function params(): { uri: string | undefined; remote: string | undefined; address: string } {
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

function NoAgent() {
  return (
    <div class="card">
      <h2>Which agent?</h2>
      <p>
        Open the inspector link your agent prints when it starts (
        <code>Agent inspector available at …</code>), or give its local address here.
      </p>
      <form method="get" action="/inspect/">
        <label>
          Agent URL
          <input name="uri" placeholder="http://127.0.0.1:8001" required />
        </label>
        <label>
          Agent address
          <input name="address" placeholder="agent1q…" required />
        </label>
        <button type="submit">Inspect</button>
      </form>
    </div>
  );
}

function Inspector() {
  const { uri, remote, address } = params();
  const auth = useSession();
  const [local, setLocal] = useState<Local>({ state: 'loading' });
  const [known, setKnown] = useState<Known>({ state: 'loading' });
  const [mode, setMode] = useState<'mailbox' | 'proxy'>('mailbox');
  const [endpoint, setEndpoint] = useState('');
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ ok: boolean; text: string } | undefined>();

  const loadLocal = async () => {
    if (!uri) return;
    setLocal({ state: 'loading' });
    try {
      const info = await localCall<LocalAgentInfo>(uri, '/agent_info');
      if (info.address !== address) {
        setLocal({ state: 'mismatch', info });
        return;
      }
      const history = await localCall<{ envelopes?: HistoryEntry[] } | null>(uri, '/messages').then(
        (h) => h?.envelopes,
        () => undefined,
      );
      setLocal({ state: 'ok', info, history });
      setEndpoint((current) => current || defaultEndpoint(uri, info));
    } catch (err) {
      setLocal({ state: 'unreachable', message: (err as Error).message });
    }
  };

  const loadKnown = async () => {
    if (auth.session.state !== 'signed-in' || !address) return;
    try {
      const agent = await api<AgentRecord>('GET', `/v2/agents/${encode(address)}`);
      setKnown({ state: 'known', agent });
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) setKnown({ state: 'unknown' });
      else setKnown({ state: 'error', message: (err as Error).message });
    }
  };

  useEffect(() => {
    void loadLocal();
  }, []);
  useEffect(() => {
    void loadKnown();
  }, [auth.session.state]);

  if (remote) {
    return (
      <div class="card">
        <h2>Not a local agent</h2>
        <p class="error" role="alert">
          The inspector connects agents running on this computer only ({remote} is not 127.0.0.1 or
          localhost). Open the link on the machine where the agent runs, or use{' '}
          <code>agentry connect</code> there.
        </p>
      </div>
    );
  }
  if (!uri || !address) return <NoAgent />;

  /** Mints a key for this one call, lets the agent use it, and revokes it straight after. */
  const withShortLivedKey = async (
    purpose: string,
    call: (key: string) => Promise<{ success?: boolean; detail?: string | null }>,
  ): Promise<{ success?: boolean; detail?: string | null }> => {
    const key = await api<NewApiKey>('POST', '/v2/api-keys', {
      label: `${purpose} ${address}`,
      expires_in_seconds: 300,
    });
    try {
      return await call(key.key);
    } finally {
      await api('DELETE', `/v2/api-keys/${key.id}`).catch(() => undefined);
    }
  };

  const act = async (kind: 'connect' | 'disconnect') => {
    setBusy(true);
    setResult(undefined);
    try {
      const answer = await withShortLivedKey(kind, (token) =>
        kind === 'connect'
          ? localCall(uri, '/connect', {
              user_token: token,
              agent_type: mode,
              ...(mode === 'proxy' ? { endpoint } : {}),
            })
          : localCall(uri, '/disconnect', { user_token: token }),
      );
      if (answer.success) {
        setResult({
          ok: true,
          text:
            kind === 'connect'
              ? `Connected: the agent is registered with Agentry as a ${mode} agent.`
              : 'Disconnected: the agent is no longer registered with Agentry.',
        });
      } else {
        const detail = answer.detail ?? 'no reason given';
        setResult({
          ok: false,
          text: /api key|not authenticated|unauthori[sz]ed/i.test(detail)
            ? `The agent's request was refused (${detail}). Check that the agent is configured to use this Agentry (${location.origin}) and not another service.`
            : `The agent could not ${kind}: ${detail}`,
        });
      }
    } catch (err) {
      setResult({ ok: false, text: (err as Error).message });
    } finally {
      setBusy(false);
      void loadKnown();
    }
  };

  return (
    <>
      <section class="card">
        <h2>Local agent</h2>
        <dl>
          <dt>Address</dt>
          <dd class="mono">{address}</dd>
          <dt>Agent URL</dt>
          <dd class="mono">{uri}</dd>
        </dl>
        {local.state === 'loading' && <p>Asking the agent…</p>}
        {local.state === 'unreachable' && (
          <p class="error" role="alert">
            {local.message}
          </p>
        )}
        {local.state === 'mismatch' && (
          <p class="error" role="alert">
            Address mismatch: the agent at {uri} is <span class="mono">{local.info.address}</span>,
            not the address in this link. Open the link this agent printed.
          </p>
        )}
        {local.state === 'ok' && <LocalInfo info={local.info} history={local.history} />}
      </section>

      <section class="card">
        <h2>Agentry</h2>
        {auth.session.state === 'loading' && <p>…</p>}
        {auth.session.state === 'signed-out' && (
          <SignIn onSignedIn={auth.signedIn} reason={auth.session.reason} />
        )}
        {auth.session.state === 'signed-in' && (
          <>
            <p>
              Signed in as <strong>{auth.session.session.user.name}</strong> ·{' '}
              <a href="/">Console</a>
            </p>
            <KnownState known={known} />
            {local.state === 'ok' && (
              <div class="connect">
                <fieldset>
                  <legend>Connect this agent</legend>
                  <label class="inline">
                    <input
                      type="radio"
                      name="mode"
                      value="mailbox"
                      checked={mode === 'mailbox'}
                      onChange={() => setMode('mailbox')}
                    />
                    Mailbox: Agentry keeps its messages until it collects them
                  </label>
                  <label class="inline">
                    <input
                      type="radio"
                      name="mode"
                      value="proxy"
                      checked={mode === 'proxy'}
                      onChange={() => setMode('proxy')}
                    />
                    Proxy: Agentry forwards messages to the agent's public endpoint
                  </label>
                  {mode === 'proxy' && (
                    <label>
                      Endpoint
                      <input
                        name="endpoint"
                        value={endpoint}
                        onInput={(e) => setEndpoint((e.target as HTMLInputElement).value)}
                      />
                    </label>
                  )}
                </fieldset>
                <button type="button" disabled={busy} onClick={() => act('connect')}>
                  Connect
                </button>{' '}
                {known.state === 'known' && (
                  <button
                    type="button"
                    class="secondary"
                    disabled={busy}
                    onClick={() => act('disconnect')}
                  >
                    Disconnect
                  </button>
                )}
              </div>
            )}
            {result && (
              <p class={result.ok ? 'ok' : 'error'} role="status">
                {result.text}
              </p>
            )}
          </>
        )}
      </section>
    </>
  );
}

function defaultEndpoint(uri: string, info: LocalAgentInfo): string {
  const own = info.endpoints?.find((e) => !e.url.includes('/v2/agents/'));
  return own?.url ?? `${uri}/submit`;
}

function LocalInfo(props: { info: LocalAgentInfo; history: HistoryEntry[] | undefined }) {
  const { info, history } = props;
  return (
    <dl>
      <dt>Network</dt>
      <dd>{info.prefix ?? '—'}</dd>
      <dt>Configured as</dt>
      <dd>{info.agent_type ?? '—'}</dd>
      <dt>Endpoints</dt>
      <dd>
        <MonoLines items={info.endpoints?.map((e) => e.url)} />
      </dd>
      <dt>Protocols</dt>
      <dd>
        <MonoLines items={info.protocols} />
      </dd>
      <dt>Recent messages</dt>
      <dd>
        {history === undefined
          ? 'not kept by this agent'
          : history.length === 0
            ? 'none'
            : `${history.length}, last from ${history[history.length - 1]?.sender ?? '?'}`}
      </dd>
    </dl>
  );
}

function KnownState(props: { known: Known }) {
  const { known } = props;
  if (known.state === 'loading') return <p>Looking the agent up…</p>;
  if (known.state === 'error') return <p class="error">{known.message}</p>;
  if (known.state === 'unknown') {
    return <p class="status">Not registered with Agentry under your user yet.</p>;
  }
  const { agent } = known;
  return (
    <dl class="status">
      <dt>Registered as</dt>
      <dd>
        <a href={`/#/agents/${encode(agent.address)}`}>{agent.name}</a>
      </dd>
      <dt>Connection</dt>
      <dd data-testid="connection">{connection(agent)}</dd>
      <dt>Pending messages</dt>
      <dd>{agent.mailbox.pending_messages}</dd>
      <dt>Updated</dt>
      <dd>{when(agent.updated_at)}</dd>
    </dl>
  );
}

function Page() {
  return (
    <>
      <header>
        <a class="brand" href="/">
          Agentry
        </a>
        <span>Agent inspector</span>
      </header>
      <main>
        <Inspector />
      </main>
    </>
  );
}

const root = document.getElementById('app')!;
// The static 'Loading…' placeholder goes; the app takes its place.
root.replaceChildren();
render(<Page />, root);
