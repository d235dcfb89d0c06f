import { useState } from 'preact/hooks';
import { api, encode, type ApiKey, type McpSession, type NewApiKey } from '../api';
import { useAction, useLoad } from '../hooks';
import { Copy, Moment } from '../widgets';

/** What a key is now: revoked, expired or active. */
function keyState(k: ApiKey) {
  if (k.revoked_at) {
    return (
      <>
        revoked <Moment iso={k.revoked_at} />
      </>
    );
  }
  if (k.expires_at && Date.parse(k.expires_at) < Date.now()) return 'expired';
  return k.current ? 'active (this session)' : 'active';
}

/** What a key may do: everything, or only reading, or only about some agents. */
function keyScope(k: ApiKey): string {
  const parts = [];
  if (k.read_only) parts.push('read-only');
  if (k.addresses) {
    parts.push(
      k.addresses.length === 1
        ? `agent ${k.addresses[0]}`
        : `${k.addresses.length} agents: ${k.addresses.join(', ')}`,
    );
  }
  return parts.length ? parts.join(', ') : 'full';
}

/** The user's API keys: create one (shown once, optionally scoped), revoke one. */
export function KeysPage() {
  return (
    <>
      <ApiKeys />
      <Assistants />
    </>
  );
}

/**
 * The assistants connected through the MCP endpoint (docs/mcp.md): where to point one, and
 * the sessions open with the user's keys, each of which can be ended.
 */
function Assistants() {
  const sessions = useLoad(() => api<McpSession[]>('GET', '/v2/mcp/sessions'), []);
  const act = useAction();
  const end = (id: string) =>
    act.run(async () => {
      await api('DELETE', `/v2/mcp/sessions/${encode(id)}`);
      sessions.reload();
    });
  const url = `${location.origin}/mcp`;
  return (
    <section class="card">
      <h2>Assistants (MCP)</h2>
      <p>
        Point an MCP client at <code data-testid="mcp-url">{url}</code>{' '}
        <Copy text={url} what="URL" /> with an API key as its bearer token (
        <code>Authorization: Bearer agy_…</code>); a read-only key lets it search and read but not
        chat or change hosted agents.
      </p>
      {act.error && <p class="error">{act.error}</p>}
      {sessions.value && sessions.value.length === 0 && <p>No assistant is connected.</p>}
      {sessions.value && sessions.value.length > 0 && (
        <table data-testid="mcp-sessions">
          <thead>
            <tr>
              <th>Client</th>
              <th>Key</th>
              <th>Opened</th>
              <th>Last used</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {sessions.value.map((s) => (
              <tr key={s.id} data-session={s.id}>
                <td>
                  {s.client_name ?? 'unnamed client'}
                  {s.client_version ? ` ${s.client_version}` : ''}
                </td>
                <td class="mono">{s.key_id}</td>
                <td>
                  <Moment iso={s.created_at} never="" />
                </td>
                <td>
                  <Moment iso={s.last_seen_at} never="" />
                </td>
                <td>
                  <button type="button" class="secondary" onClick={() => end(s.id)}>
                    End
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function ApiKeys() {
  const keys = useLoad(() => api<ApiKey[]>('GET', '/v2/api-keys'), []);
  const [label, setLabel] = useState('');
  const [lifetime, setLifetime] = useState('');
  const [readOnly, setReadOnly] = useState(false);
  const [agents, setAgents] = useState('');
  const [created, setCreated] = useState<NewApiKey | undefined>();
  const act = useAction();
  const create = act.submit(async () => {
    const addresses = agents.split(/[\s,]+/).filter(Boolean);
    const key = await api<NewApiKey>('POST', '/v2/api-keys', {
      label: label || null,
      expires_in_seconds: lifetime ? Number(lifetime) : null,
      read_only: readOnly,
      addresses: addresses.length ? addresses : null,
    });
    setCreated(key);
    setLabel('');
    setReadOnly(false);
    setAgents('');
    keys.reload();
  });
  const revoke = (id: string) =>
    act.run(async () => {
      await api('DELETE', `/v2/api-keys/${encode(id)}`);
      keys.reload();
    });
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
        <label>
          <input
            type="checkbox"
            name="read_only"
            checked={readOnly}
            onChange={(e) => setReadOnly((e.target as HTMLInputElement).checked)}
          />{' '}
          Read only
        </label>
        <input
          name="agents"
          placeholder="Only these agents (addresses; empty: all)"
          aria-label="Only these agents"
          value={agents}
          onInput={(e) => setAgents((e.target as HTMLInputElement).value)}
        />
        <button type="submit">Create key</button>
      </form>
      {act.error && <p class="error">{act.error}</p>}
      {created && (
        <div class="once" role="status">
          <p>Your new key, shown this once only. Copy it now:</p>
          <code data-testid="new-key">{created.key}</code> <Copy text={created.key} what="key" />
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
              <th>Scope</th>
              <th>State</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {keys.value.map((k) => (
              <tr key={k.id} data-key={k.id}>
                <td class="mono">{k.id}</td>
                <td>{k.label ?? ''}</td>
                <td>
                  <Moment iso={k.created_at} never="" />
                </td>
                <td>
                  <Moment iso={k.expires_at} never="" />
                </td>
                <td class="scope">{keyScope(k)}</td>
                <td>{keyState(k)}</td>
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
