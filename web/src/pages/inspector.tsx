import { useState } from 'preact/hooks';
import { api, ApiError, connection, currentTeam, encode, type AgentRecord } from '../api';
import { useAction, useLoad } from '../hooks';
import {
  askAgent,
  defaultEndpoint,
  probeAgent,
  type HistoryEntry,
  type LocalAgentInfo,
} from '../local-agent';
import { SignIn, type Auth } from '../session';
import { Moment, MonoLines, OrNone, Protocols } from '../widgets';

/** The agent a link names: what it says of itself, and what Agentry knows of it. */
export function Inspector(props: { uri: string; address: string; auth: Auth }) {
  const { uri, address, auth } = props;
  const local = useLoad(() => probeAgent(uri, address), []);
  const agent = local.value;
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
        {!agent && !local.error && <p>Asking the agent…</p>}
        {local.error && (
          <p class="error" role="alert">
            {local.error}
          </p>
        )}
        {agent?.state === 'mismatch' && (
          <p class="error" role="alert">
            Address mismatch: the agent at {uri} is <span class="mono">{agent.info.address}</span>,
            not the address in this link. Open the link this agent printed.
          </p>
        )}
        {agent?.state === 'ok' && <LocalInfo info={agent.info} history={agent.history} />}
      </section>

      <section class="card">
        <h2>Agentry</h2>
        {auth.session.state === 'loading' && <p>…</p>}
        {auth.session.state === 'signed-out' && (
          <SignIn onSignedIn={auth.signedIn} reason={auth.session.reason} />
        )}
        {auth.session.state === 'signed-in' && (
          <Registration
            uri={uri}
            address={address}
            user={auth.session.session.user.name}
            info={agent?.state === 'ok' ? agent.info : undefined}
          />
        )}
      </section>
    </>
  );
}

/** What the agent's own server says of it. */
function LocalInfo(props: { info: LocalAgentInfo; history: HistoryEntry[] | undefined }) {
  const { info, history } = props;
  return (
    <dl>
      <dt>Network</dt>
      <dd>
        <OrNone value={info.prefix} />
      </dd>
      <dt>Configured as</dt>
      <dd>
        <OrNone value={info.agent_type} />
      </dd>
      <dt>Endpoints</dt>
      <dd>
        <MonoLines items={info.endpoints?.map((e) => e.url)} />
      </dd>
      <dt>Protocols</dt>
      <dd>
        <Protocols digests={info.protocols} />
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

/**
 * Signed in: what Agentry knows of the agent and, once the agent has answered, the buttons
 * that connect or disconnect it.
 */
function Registration(props: {
  uri: string;
  address: string;
  user: string;
  info: LocalAgentInfo | undefined;
}) {
  const known = useLoad(
    () =>
      api<AgentRecord>('GET', `/v2/agents/${encode(props.address)}`).catch((err: unknown) => {
        if (err instanceof ApiError && err.status === 404) return null;
        throw err;
      }),
    [props.address],
  );
  return (
    <>
      <p>
        Signed in as <strong>{props.user}</strong>
        {currentTeam() && (
          <>
            , acting for team <strong data-testid="team">{currentTeam()}</strong> (switch in the
            console)
          </>
        )}{' '}
        · <a href="/">Console</a>
      </p>
      <KnownState known={known} />
      {props.info && (
        <Connect
          uri={props.uri}
          address={props.address}
          info={props.info}
          registered={Boolean(known.value) && !known.error}
          onDone={known.reload}
        />
      )}
    </>
  );
}

/** Agentry's record of the agent: `null` when it has none. */
function KnownState(props: { known: { value?: AgentRecord | null; error?: string } }) {
  const { value: agent, error } = props.known;
  if (error) return <p class="error">{error}</p>;
  if (agent === undefined) return <p>Looking the agent up…</p>;
  if (agent === null) {
    const owner = currentTeam() ? `team ${currentTeam()}` : 'your user';
    return <p class="status">Not registered with Agentry under {owner} yet.</p>;
  }
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
      <dd>
        <Moment iso={agent.updated_at} never="" />
      </dd>
    </dl>
  );
}

/** Whether this server forwards to loopback and private addresses (the page is told). */
function privateTargetsRefused(): boolean {
  const meta = document.querySelector<HTMLMetaElement>('meta[name="agentry-private-targets"]');
  return meta?.content === 'refused';
}

/** A loopback, private or link-local host, written as such (names are not resolved here). */
function isPrivateHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost') || host === '::1' || host === '::') {
    return true;
  }
  const v4 = /^(\d{1,3})\.(\d{1,3})\.\d{1,3}\.\d{1,3}$/.exec(host);
  if (v4) {
    const [a, b] = [Number(v4[1]), Number(v4[2])];
    return (
      a === 127 ||
      a === 10 ||
      a === 0 ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) ||
      (a === 169 && b === 254) ||
      (a === 100 && b >= 64 && b <= 127)
    );
  }
  return /^(fc|fd|fe8|fe9|fea|feb)/.test(host) && host.includes(':');
}

/**
 * Why this server would never forward to `endpoint`, with the fix; undefined when it would.
 * A proxy agent connected to such an endpoint would look connected and receive nothing.
 */
export function unreachableEndpoint(endpoint: string): string | undefined {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return `The endpoint "${endpoint}" is not a URL: give the agent's public address, such as https://agent.example.com/submit.`;
  }
  if (!privateTargetsRefused() || !isPrivateHost(url.hostname)) return undefined;
  return `Agentry would not forward to ${url.host}: it is a loopback or private address, and this server forwards to public addresses only. Give the agent's public endpoint, connect it as a mailbox agent instead, or start the server with --allow-private-targets (AGENTRY_ALLOW_PRIVATE_TARGETS=true) when Agentry and the agent share a private network.`;
}

/** Connect as a mailbox or a proxy, or disconnect; then says how it went. */
function Connect(props: {
  uri: string;
  address: string;
  info: LocalAgentInfo;
  registered: boolean;
  onDone: () => void;
}) {
  const { uri } = props;
  const [mode, setMode] = useState<'mailbox' | 'proxy'>('mailbox');
  const [endpoint, setEndpoint] = useState(() => defaultEndpoint(uri, props.info));
  const [result, setResult] = useState<{ ok: boolean; text: string } | undefined>();
  const act = useAction({ onError: (text) => setResult({ ok: false, text }) });

  const change = async (kind: 'connect' | 'disconnect') => {
    await act.run(async () => {
      setResult(undefined);
      if (kind === 'connect' && mode === 'proxy') {
        const refusal = unreachableEndpoint(endpoint);
        if (refusal) throw new Error(refusal);
      }
      const answer = await askAgent(uri, props.address, kind, mode, endpoint);
      if (answer.success) {
        setResult({
          ok: true,
          text:
            kind === 'connect'
              ? `Connected: the agent is registered with Agentry as a ${mode} agent.`
              : 'Disconnected: the agent is no longer registered with Agentry.',
        });
        return;
      }
      const detail = answer.detail ?? 'no reason given';
      throw new Error(
        /api key|not authenticated|unauthori[sz]ed/i.test(detail)
          ? `The agent's request was refused (${detail}). Check that the agent is configured to use this Agentry (${location.origin}) and not another service.`
          : `The agent could not ${kind}: ${detail}`,
      );
    });
    props.onDone();
  };

  return (
    <>
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
        <button type="button" disabled={act.busy} onClick={() => change('connect')}>
          Connect
        </button>{' '}
        {props.registered && (
          <button
            type="button"
            class="secondary"
            disabled={act.busy}
            onClick={() => change('disconnect')}
          >
            Disconnect
          </button>
        )}
      </div>
      {result && (
        <p class={result.ok ? 'ok' : 'error'} role="status">
          {result.text}
        </p>
      )}
    </>
  );
}
