import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import {
  api,
  ApiError,
  bytes,
  connection,
  encode,
  when,
  type AgentRecord,
  type AlmanacAgent,
  type DeliveryEventView,
  type ApiKey,
  type DomainRecord,
  type NewApiKey,
  type StoredEnvelope,
  type UsagePeriod,
  type UsageReport,
} from './api';
import { ConfirmButton, MonoLines } from './widgets';
import { Markdown } from './markdown';
import { ClaimName, NameCard } from './names';
import { SignIn, useSession } from './session';
import './style.css';

function useHashRoute(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return hash.replace(/^#/, '') || '/agents';
}

/** Loads something, again when `deps` change or on reload (a 401 ends the session in `api`). */
function useLoad<T>(load: () => Promise<T>, deps: unknown[]) {
  const [value, setValue] = useState<T | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setError(undefined);
    load().then(
      (v) => live && setValue(v),
      (err: unknown) => live && setError((err as Error).message),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  return { value, error, reload: () => setTick((t) => t + 1) };
}

function AgentsList() {
  const { value: agents, error } = useLoad(
    () => api<AgentRecord[]>('GET', '/v2/agents?limit=1000'),
    [],
  );
  const [filter, setFilter] = useState('');
  const [kind, setKind] = useState('all');
  if (error) return <p class="error">{error}</p>;
  if (!agents) return <p>Loading agents…</p>;
  const needle = filter.trim().toLowerCase();
  const shown = agents.filter(
    (a) =>
      (kind === 'all' || (kind === 'proxy') === Boolean(a.redirect_url)) &&
      (!needle ||
        a.name.toLowerCase().includes(needle) ||
        a.address.includes(needle) ||
        (a.handle ?? '').includes(needle)),
  );
  return (
    <section class="card">
      <h2>Agents</h2>
      <div class="filters">
        <input
          type="search"
          placeholder="Search by name, handle or address"
          aria-label="Search agents"
          value={filter}
          onInput={(e) => setFilter((e.target as HTMLInputElement).value)}
        />
        <select
          aria-label="Connection"
          value={kind}
          onChange={(e) => setKind((e.target as HTMLSelectElement).value)}
        >
          <option value="all">All</option>
          <option value="mailbox">Mailbox</option>
          <option value="proxy">Proxy</option>
        </select>
      </div>
      {agents.length === 0 ? (
        <p>
          No agents yet. Start a uAgent pointed at this Agentry and open the inspector link it
          prints.
        </p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Name</th>
              <th>Address</th>
              <th>Connection</th>
              <th>Pending</th>
              <th>Updated</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((a) => (
              <tr key={a.address}>
                <td>
                  <a href={`#/agents/${encode(a.address)}`}>{a.name}</a>
                </td>
                <td class="mono">{a.address}</td>
                <td>{connection(a)}</td>
                <td>{a.mailbox.pending_messages}</td>
                <td>{when(a.updated_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function payloadText(payload: string | null | undefined): string {
  if (!payload) return '';
  try {
    const bin = atob(payload);
    return new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  } catch {
    return payload;
  }
}

function AgentPage(props: { address: string }) {
  const { address } = props;
  const path = `/v2/agents/${encode(address)}`;
  const agent = useLoad(() => api<AgentRecord>('GET', path), [address]);
  const messages = useLoad(() => api<StoredEnvelope[]>('GET', `${path}/mailbox`), [address]);
  const almanac = useLoad(
    () =>
      api<AlmanacAgent>('GET', `/v1/almanac/agents/${encode(address)}`).catch((err: unknown) => {
        if (err instanceof ApiError && err.status === 404) return null;
        throw err;
      }),
    [address],
  );
  const [editing, setEditing] = useState(false);
  const [notice, setNotice] = useState<string | undefined>();

  if (agent.error) return <p class="error">{agent.error}</p>;
  const a = agent.value;
  if (!a) return <p>Loading…</p>;

  const remove = async (uuid: string) => {
    try {
      await api('DELETE', `${path}/mailbox/${encode(uuid)}`);
      setNotice('Message deleted.');
      messages.reload();
      agent.reload();
    } catch (err) {
      setNotice((err as Error).message);
    }
  };

  return (
    <>
      <section class="card">
        <h2 data-testid="agent-name">{a.name}</h2>
        <p class="mono">{a.address}</p>
        {notice && <p class="status">{notice}</p>}
        <dl>
          <dt>Connection</dt>
          <dd>{connection(a)}</dd>
          <dt>Handle</dt>
          <dd>{a.handle ?? '—'}</dd>
          <dt>Description</dt>
          <dd>{a.profile.description || '—'}</dd>
          <dt>Endpoints</dt>
          <dd>
            <MonoLines items={a.endpoints.map((e) => e.url)} empty="" />
          </dd>
          <dt>Protocols</dt>
          <dd>
            <MonoLines items={a.protocols} />
          </dd>
          <dt>Metadata</dt>
          <dd>
            <pre>{a.metadata ? JSON.stringify(a.metadata, null, 2) : '—'}</pre>
          </dd>
          <dt>Registered</dt>
          <dd>{when(a.registered_at)}</dd>
          <dt>Almanac</dt>
          <dd>
            {almanac.value === undefined
              ? '…'
              : almanac.value === null
                ? 'not in the Almanac'
                : `registered, expires ${when(almanac.value.expiry)}`}
          </dd>
        </dl>
        <h3>Readme</h3>
        <div class="readme" data-testid="readme">
          {a.profile.readme ? <Markdown source={a.profile.readme} /> : <p>(none)</p>}
        </div>
        <DeleteAgent address={a.address} onError={setNotice} />{' '}
        {editing ? (
          <EditAgent
            agent={a}
            onDone={(msg) => {
              setEditing(false);
              if (msg) setNotice(msg);
              agent.reload();
            }}
          />
        ) : (
          <button type="button" onClick={() => setEditing(true)}>
            Edit name and readme
          </button>
        )}
      </section>
      <section class="card">
        <h2>Mailbox</h2>
        <p>
          {a.mailbox.pending_messages} pending, {bytes(a.mailbox.bytes_stored)} stored
        </p>
        {messages.error && <p class="error">{messages.error}</p>}
        {messages.value && messages.value.length > 0 && (
          <table data-testid="messages">
            <thead>
              <tr>
                <th>Received</th>
                <th>From</th>
                <th>Payload</th>
                <th>Expires</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {messages.value.map((m) => (
                <tr key={m.uuid}>
                  <td>{when(m.received_at)}</td>
                  <td class="mono">{m.envelope.sender}</td>
                  <td>
                    <code>{payloadText(m.envelope.payload).slice(0, 200)}</code>
                  </td>
                  <td>{when(m.expires_at)}</td>
                  <td>
                    <MessageTrace path={`${path}/deliveries/${encode(m.uuid)}`} />{' '}
                    <button type="button" class="secondary" onClick={() => remove(m.uuid)}>
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </>
  );
}

/** One message's delivery trace, loaded when asked for. */
function MessageTrace(props: { path: string }) {
  const [events, setEvents] = useState<DeliveryEventView[] | string | undefined>();
  if (events === undefined) {
    const load = () =>
      api<DeliveryEventView[]>('GET', props.path).then(setEvents, (err: unknown) =>
        setEvents((err as Error).message),
      );
    return (
      <button type="button" class="secondary" onClick={load}>
        Trace
      </button>
    );
  }
  if (typeof events === 'string') return <span class="error">{events}</span>;
  return (
    <ol class="trace" data-testid="trace">
      {events.map((e, i) => (
        <li key={i}>
          {when(e.at)} {e.event}
          {e.status_code !== null && ` ${e.status_code}`}
          {e.latency_ms !== null && ` ${e.latency_ms} ms`}
          {e.detail && ` (${e.detail})`}
        </li>
      ))}
    </ol>
  );
}

function DeleteAgent(props: { address: string; onError: (message: string) => void }) {
  const remove = async () => {
    try {
      await api('DELETE', `/v2/agents/${encode(props.address)}`);
      location.hash = '#/agents';
    } catch (err) {
      props.onError((err as Error).message);
    }
  };
  return (
    <ConfirmButton
      label="Delete agent…"
      question="Delete the agent, its mailbox and pending messages?"
      action="Delete agent"
      onConfirm={remove}
    />
  );
}

function EditAgent(props: { agent: AgentRecord; onDone: (message?: string) => void }) {
  const { agent } = props;
  const [name, setName] = useState(agent.name);
  const [readme, setReadme] = useState(agent.profile.readme);
  const [error, setError] = useState<string | undefined>();
  const save = async (event: Event) => {
    event.preventDefault();
    try {
      await api('PUT', `/v2/agents/${encode(agent.address)}`, {
        address: agent.address,
        name,
        profile: { ...agent.profile, readme },
      });
      props.onDone('Saved.');
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <form onSubmit={save}>
      <label>
        Name
        <input
          name="name"
          value={name}
          maxLength={32}
          onInput={(e) => setName((e.target as HTMLInputElement).value)}
        />
      </label>
      <label>
        Readme
        <textarea
          name="readme"
          rows={8}
          value={readme}
          onInput={(e) => setReadme((e.target as HTMLTextAreaElement).value)}
        />
      </label>
      <button type="submit">Save</button>{' '}
      <button type="button" class="secondary" onClick={() => props.onDone()}>
        Cancel
      </button>
      {error && <p class="error">{error}</p>}
    </form>
  );
}

function Meter(props: { label: string; value: number; max: number; show: (n: number) => string }) {
  return (
    <div class="meter">
      <span>{props.label}</span>
      <meter value={props.value} min={0} max={Math.max(props.max, 1)} />
      <span>
        {props.show(props.value)} of {props.show(props.max)}
      </span>
    </div>
  );
}

function UsagePage() {
  const usage = useLoad(
    () =>
      Promise.all([
        api<UsageReport>('GET', '/v2/agents/usage/current'),
        api<UsagePeriod[]>('GET', '/v2/agents/usage/history?months=12'),
      ]),
    [],
  );
  if (usage.error) return <p class="error">{usage.error}</p>;
  if (!usage.value) return <p>Loading…</p>;
  const [u, history] = usage.value;
  const count = (n: number) => n.toLocaleString();
  const months = [...history].reverse();
  const peak = Math.max(1, ...months.map((m) => m.num_messages));
  return (
    <section class="card">
      <h2>Usage</h2>
      <p>This period ends {when(u.expiry)}.</p>
      <Meter label="Agents" value={u.num_agents} max={u.num_agents_limit} show={count} />
      <Meter label="Messages" value={u.num_messages} max={u.num_messages_limit} show={count} />
      <Meter label="Stored" value={u.bytes_stored} max={u.bytes_stored_limit} show={bytes} />
      <Meter
        label="Transferred"
        value={u.bytes_transferred}
        max={u.bytes_transferred_limit}
        show={bytes}
      />
      <h3>Messages per month</h3>
      {months.length === 0 ? (
        <p>No messages yet.</p>
      ) : (
        <svg
          class="chart"
          viewBox={`0 0 ${months.length * 60} 140`}
          role="img"
          aria-label="Messages per month"
        >
          {months.map((m, i) => {
            const h = Math.round((m.num_messages / peak) * 100);
            return (
              <g key={m.period}>
                <rect x={i * 60 + 10} y={110 - h} width={40} height={h} />
                <text x={i * 60 + 30} y={126} text-anchor="middle">
                  {m.period}
                </text>
                <text x={i * 60 + 30} y={104 - h} text-anchor="middle">
                  {m.num_messages}
                </text>
              </g>
            );
          })}
        </svg>
      )}
    </section>
  );
}

function KeysPage() {
  const keys = useLoad(() => api<ApiKey[]>('GET', '/v2/api-keys'), []);
  const [label, setLabel] = useState('');
  const [lifetime, setLifetime] = useState('');
  const [created, setCreated] = useState<NewApiKey | undefined>();
  const [error, setError] = useState<string | undefined>();
  const create = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    try {
      const key = await api<NewApiKey>('POST', '/v2/api-keys', {
        label: label || null,
        expires_in_seconds: lifetime ? Number(lifetime) : null,
      });
      setCreated(key);
      setLabel('');
      keys.reload();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const revoke = async (id: string) => {
    try {
      await api('DELETE', `/v2/api-keys/${encode(id)}`);
      keys.reload();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <section class="card">
      <h2>API keys</h2>
      <form class="filters" onSubmit={create}>
        <input
          name="label"
          placeholder="What is it for?"
          aria-label="Label"
          value={label}
          onInput={(e) => setLabel((e.target as HTMLInputElement).value)}
        />
        <select
          name="lifetime"
          aria-label="Expires"
          value={lifetime}
          onChange={(e) => setLifetime((e.target as HTMLSelectElement).value)}
        >
          <option value="">Never expires</option>
          <option value="86400">1 day</option>
          <option value="2592000">30 days</option>
          <option value="31536000">1 year</option>
        </select>
        <button type="submit">Create key</button>
      </form>
      {error && <p class="error">{error}</p>}
      {created && (
        <div class="once" role="status">
          <p>Your new key, shown this once only. Copy it now:</p>
          <code data-testid="new-key">{created.key}</code>
        </div>
      )}
      {keys.value && (
        <table data-testid="keys">
          <thead>
            <tr>
              <th>Id</th>
              <th>Label</th>
              <th>Created</th>
              <th>Expires</th>
              <th>State</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {keys.value.map((k) => (
              <tr key={k.id} data-key={k.id}>
                <td class="mono">{k.id}</td>
                <td>{k.label ?? ''}</td>
                <td>{when(k.created_at)}</td>
                <td>{when(k.expires_at)}</td>
                <td>
                  {k.revoked_at
                    ? `revoked ${when(k.revoked_at)}`
                    : k.expires_at && Date.parse(k.expires_at) < Date.now()
                      ? 'expired'
                      : k.current
                        ? 'active (this session)'
                        : 'active'}
                </td>
                <td>
                  {!k.revoked_at && (
                    <button type="button" class="secondary" onClick={() => revoke(k.id)}>
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function NamesPage() {
  const names = useLoad(
    () =>
      Promise.all([
        api<DomainRecord[]>('GET', '/v2/users/domains'),
        api<AgentRecord[]>('GET', '/v2/agents?limit=1000'),
      ]),
    [],
  );
  const [notice, setNotice] = useState<string | undefined>();
  if (names.error) return <p class="error">{names.error}</p>;
  if (!names.value) return <p>Loading…</p>;
  const [domains, agents] = names.value;
  const changed = (message: string) => {
    setNotice(message);
    names.reload();
  };
  return (
    <section class="card">
      <h2>Names</h2>
      <p>
        A name such as <code>alice.agent</code> lets other agents send to it instead of an address;
        each message goes to one of its agents, chosen by weight.
      </p>
      <ClaimName agents={agents} onClaimed={(name) => changed(`${name} is yours.`)} />
      {notice && (
        <p class="status" role="status">
          {notice}
        </p>
      )}
      {domains.length === 0 ? (
        <p>You have no names yet.</p>
      ) : (
        domains.map((d) => <NameCard key={d.name} domain={d} agents={agents} onChanged={changed} />)
      )}
    </section>
  );
}

function Console() {
  const auth = useSession();
  const route = useHashRoute();
  const { session } = auth;
  let page;
  if (session.state === 'loading') page = <p>Loading…</p>;
  else if (session.state === 'signed-out') {
    page = <SignIn onSignedIn={auth.signedIn} reason={session.reason} />;
  } else if (route.startsWith('/agents/')) {
    page = <AgentPage address={decodeURIComponent(route.slice('/agents/'.length))} />;
  } else if (route === '/usage') page = <UsagePage />;
  else if (route === '/keys') page = <KeysPage />;
  else if (route === '/names') page = <NamesPage />;
  else page = <AgentsList />;
  return (
    <>
      <header>
        <a class="brand" href="#/agents">
          Agentry
        </a>
        {session.state === 'signed-in' && (
          <nav>
            <a href="#/agents">Agents</a>
            <a href="#/names">Names</a>
            <a href="#/usage">Usage</a>
            <a href="#/keys">API keys</a>
            <a href="/inspect/">Inspector</a>
            <a href="/docs">API docs</a>
            <span class="user">{session.session.user.name}</span>
            <button type="button" class="secondary" onClick={() => auth.signOut()}>
              Sign out
            </button>
          </nav>
        )}
      </header>
      <main>{page}</main>
    </>
  );
}

const root = document.getElementById('app')!;
// The static 'Loading…' placeholder goes; the app takes its place.
root.replaceChildren();
render(<Console />, root);
