import { useLayoutEffect, useRef, useState } from 'preact/hooks';
import {
  api,
  encode,
  type HostedAgent,
  type HostedLogLine,
  type HostedSecret,
  type HostedStateName,
} from '../api';
import { useAction, useEvery, useLoad } from '../hooks';
import { ConfirmButton, Copy, Moment, None } from '../widgets';
import { HostedCode } from './hosted-code';
import { HostedStateBadge } from './hosted';

/** The states of an agent whose process is (or is being) run: starting it again does nothing. */
const LIVE: HostedStateName[] = ['compiling', 'running', 'crashed'];

/** The agent's state is read again this often while the page is visible. */
const STATE_MS = 2000;
/** And its newest log lines this often. */
const LOGS_MS = 1500;

/** One hosted agent: its state with start and stop, its code, its secrets and its logs. */
export function HostedAgentPage(props: { address: string }) {
  const { address } = props;
  const path = `/v1/hosting/agents/${encode(address)}`;
  const agent = useLoad(() => api<HostedAgent>('GET', path), [address]);
  useEvery(STATE_MS, () => {
    if (!document.hidden) agent.reload();
  });
  /** The outcome of the last action on the agent, done or refused. */
  const [notice, setNotice] = useState<string | undefined>();
  const act = useAction({ onError: setNotice });
  /** Saves the code in the editor when it has unsaved changes (set by the editor). */
  const saveUnsaved = useRef<(() => Promise<void>) | undefined>(undefined);

  if (agent.error && !agent.value) return <p class="error">{agent.error}</p>;
  const a = agent.value;
  if (!a) return <p>Loading…</p>;
  const { state } = a;

  const startOrStop = (what: 'start' | 'stop') =>
    act.run(async () => {
      setNotice(undefined);
      // The agent starts with the code as the editor shows it.
      if (what === 'start') await saveUnsaved.current?.();
      await api<HostedAgent>('POST', `${path}/${what}`);
      agent.reload();
    });
  const remove = () =>
    act.run(async () => {
      await api('DELETE', path);
      location.hash = '#/hosted';
    });

  return (
    <>
      <section class="card">
        <h2 data-testid="hosted-name">{a.name}</h2>
        {agent.error && <p class="error">{agent.error}</p>}
        <p class="mono">
          {a.address} <Copy text={a.address} what="address" />
        </p>
        <p>
          <a href={`#/agents/${encode(a.address)}`}>As an agent</a>
          {' · '}
          <a href={`#/agents/${encode(a.address)}/activity`}>Activity and live timeline</a>
          {' · '}
          <a href="#/hosted">All hosted agents</a>
        </p>
        <dl>
          <dt>State</dt>
          <dd data-testid="hosted-state">
            <HostedStateBadge agent={a} />
          </dd>
          <dt>Code</dt>
          <dd>
            {a.code_digest ? (
              <>
                <span class="mono" title="SHA-256 of the code as saved">
                  {a.code_digest.slice(0, 16)}…
                </span>{' '}
                saved <Moment iso={a.code_update_timestamp} />
              </>
            ) : (
              <None />
            )}
          </dd>
          <dt>Created</dt>
          <dd>
            <Moment iso={a.creation_timestamp} />
          </dd>
        </dl>
        <p>
          <button
            type="button"
            disabled={act.busy || (a.running && LIVE.includes(state))}
            onClick={() => startOrStop('start')}
          >
            Start
          </button>{' '}
          <button
            type="button"
            class="secondary"
            disabled={act.busy || (!a.running && state === 'stopped')}
            onClick={() => startOrStop('stop')}
          >
            Stop
          </button>{' '}
          <ConfirmButton
            label="Delete hosted agent…"
            question="Stop the agent and delete it with its code, secrets, storage and logs?"
            action="Delete hosted agent"
            onConfirm={remove}
          />
        </p>
        {notice && (
          <p class="error" role="alert">
            {notice}
          </p>
        )}
      </section>
      <HostedCode path={path} onSaved={agent.reload} saveUnsaved={saveUnsaved} />
      <HostedSecrets address={address} />
      <HostedLogs path={path} />
    </>
  );
}

/** The agent's secrets, given to its process as environment variables: list, set, delete. */
function HostedSecrets(props: { address: string }) {
  const { address } = props;
  const secrets = useLoad(
    () => api<{ secrets: HostedSecret[] }>('GET', `/v1/hosting/${encode(address)}/secrets`),
    [address],
  );
  const [name, setName] = useState('');
  const [value, setValue] = useState('');
  const act = useAction();
  const save = act.submit(async () => {
    await api('POST', '/v1/hosting/secrets', { address, name: name.trim(), secret: value });
    setName('');
    setValue('');
    secrets.reload();
  });
  const remove = (secret: string) =>
    act.run(async () => {
      await api('DELETE', `/v1/hosting/secrets/${encode(address)}/${encode(secret)}`);
      secrets.reload();
    });
  const list = secrets.value?.secrets;
  return (
    <section class="card">
      <h3>Secrets</h3>
      <p>
        Given to the agent as environment variables by name; the values are kept encrypted and never
        shown again. Saving a name that exists replaces its value; a running agent sees it when it
        is next started.
      </p>
      <form class="filters" onSubmit={save}>
        <input
          name="secret-name"
          placeholder="NAME"
          aria-label="Secret name"
          required
          pattern="[A-Za-z_][A-Za-z0-9_]*"
          title="A Python identifier: letters, digits and _, not starting with a digit"
          value={name}
          onInput={(e) => setName((e.target as HTMLInputElement).value)}
        />
        <input
          type="password"
          name="secret-value"
          placeholder="Value"
          aria-label="Secret value"
          autocomplete="off"
          required
          value={value}
          onInput={(e) => setValue((e.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={act.busy}>
          Save secret
        </button>
      </form>
      {act.error && <p class="error">{act.error}</p>}
      {secrets.error && <p class="error">{secrets.error}</p>}
      {list &&
        (list.length === 0 ? (
          <p>
            <None />
          </p>
        ) : (
          <table data-testid="secrets">
            <thead>
              <tr>
                <th>Name</th>
                <th>Value</th>
                <th>Set</th>
                <th>
                  <span class="visually-hidden">Delete</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.map((s) => (
                <tr key={s.name} data-secret={s.name}>
                  <td class="mono">{s.name}</td>
                  <td class="mono">{s.secret}</td>
                  <td>
                    <Moment iso={s.timestamp} never="" />
                  </td>
                  <td>
                    <button
                      type="button"
                      class="secondary"
                      aria-label={`Delete secret ${s.name}`}
                      onClick={() => remove(s.name)}
                    >
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ))}
    </section>
  );
}

/** The levels of log lines, the least severe first. */
const LEVELS: HostedLogLine['log_level'][] = ['trce', 'debg', 'info', 'warn', 'erro'];
/** What the level filter offers: every line, or those at a level and above. */
const LEVEL_CHOICES: { value: string; label: string }[] = [
  { value: 'all', label: 'Every level' },
  { value: 'info', label: 'info and above' },
  { value: 'warn', label: 'warn and above' },
  { value: 'erro', label: 'erro only' },
];

/**
 * The agent's newest log lines, read again every second or two while the page is visible,
 * filtered by level; the list opens at the newest line and follows new ones while it is
 * scrolled to the end.
 */
function HostedLogs(props: { path: string }) {
  const { path } = props;
  const logs = useLoad(() => api<HostedLogLine[]>('GET', `${path}/logs/latest`), [path]);
  useEvery(LOGS_MS, () => {
    if (!document.hidden) logs.reload();
  });
  const [least, setLeast] = useState('all');
  const list = useRef<HTMLOListElement>(null);
  /** Whether the list shows its end: new lines then keep it there. */
  const atEnd = useRef(true);
  const act = useAction();
  const clear = () =>
    act.run(async () => {
      await api('DELETE', `${path}/logs`);
      logs.reload();
    });
  const lowest = least === 'all' ? 0 : LEVELS.indexOf(least as HostedLogLine['log_level']);
  // Oldest first, as a terminal shows them; lines of the same moment keep the answer's order.
  const lines = [...(logs.value ?? [])]
    .filter((line) => LEVELS.indexOf(line.log_level) >= lowest)
    .sort((x, y) => Date.parse(x.log_timestamp) - Date.parse(y.log_timestamp));
  const newest = lines.length === 0 ? '' : lines[lines.length - 1]!.log_timestamp;
  useLayoutEffect(() => {
    const element = list.current;
    if (element && atEnd.current) element.scrollTop = element.scrollHeight;
  }, [lines.length, newest, least]);
  return (
    <section class="card">
      <h3>Logs</h3>
      <p>
        What the agent prints, and what Agentry says of it (starts, stops, crashes), newest last.{' '}
        <button type="button" class="secondary" disabled={act.busy} onClick={clear}>
          Clear logs
        </button>
      </p>
      <div class="filters">
        <select
          aria-label="Log level"
          value={least}
          onChange={(e) => {
            atEnd.current = true;
            setLeast((e.target as HTMLSelectElement).value);
          }}
        >
          {LEVEL_CHOICES.map((choice) => (
            <option key={choice.value} value={choice.value}>
              {choice.label}
            </option>
          ))}
        </select>
      </div>
      {act.error && <p class="error">{act.error}</p>}
      {logs.error && <p class="error">{logs.error}</p>}
      {logs.value &&
        (lines.length === 0 ? (
          <p data-testid="no-logs">
            <None />
          </p>
        ) : (
          <ol
            class="logs"
            data-testid="logs"
            ref={list}
            onScroll={(e) => {
              const element = e.currentTarget;
              atEnd.current = element.scrollTop + element.clientHeight >= element.scrollHeight - 4;
            }}
          >
            {lines.map((line, i) => (
              <li
                key={`${line.log_timestamp} ${i}`}
                class={`log-${line.log_level} log-${line.log_type}`}
              >
                <Moment iso={line.log_timestamp} clock="seconds" />{' '}
                <span class="level">{line.log_level}</span>{' '}
                {line.log_type === 'system' && <span class="level">agentry</span>}{' '}
                <span class="entry">{line.log_entry}</span>
              </li>
            ))}
          </ol>
        ))}
    </section>
  );
}
