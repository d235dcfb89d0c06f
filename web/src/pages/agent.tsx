import { useState } from 'preact/hooks';
import {
  api,
  ApiError,
  connection,
  encode,
  type AgentRecord,
  type AlmanacAgent,
  type StoredEnvelope,
} from '../api';
import { useAction, useLoad } from '../hooks';
import { Markdown } from '../markdown';
import {
  AgentTabs,
  ConfirmButton,
  Copy,
  Moment,
  MonoLines,
  None,
  OrNone,
  Protocols,
  StatusBadge,
  StatusReason,
} from '../widgets';
import { A2aPanel } from './a2a';
import { FederationPanel } from './federation';
import { Mailbox } from './mailbox';

/**
 * One agent: what it says of itself, its Almanac entry, edit and delete, and its mailbox; its
 * tabs lead to its activity and to a chat with it.
 */
export function AgentPage(props: { address: string }) {
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
  /** The outcome of the last change made here, done or refused. */
  const [notice, setNotice] = useState<string | undefined>();
  const act = useAction({ onError: setNotice });

  if (agent.error) return <p class="error">{agent.error}</p>;
  const a = agent.value;
  if (!a) return <p>Loading…</p>;

  const removeAgent = () =>
    act.run(async () => {
      await api('DELETE', `/v2/agents/${encode(a.address)}`);
      location.hash = '#/agents';
    });
  const removeMessage = (uuid: string) =>
    act.run(async () => {
      await api('DELETE', `${path}/mailbox/${encode(uuid)}`);
      setNotice('Message deleted.');
      messages.reload();
      agent.reload();
    });

  return (
    <>
      <AgentTabs address={a.address} current="Overview" />
      <section class="card">
        <h2 data-testid="agent-name">{a.name}</h2>
        <p class="mono">
          {a.address} <Copy text={a.address} what="address" />
        </p>
        {notice && <p class="status">{notice}</p>}
        <dl>
          <dt>Status</dt>
          <dd>
            <StatusBadge status={a.status.status} />
            <StatusReason status={a.status} />
          </dd>
          <dt>Last seen</dt>
          <dd>
            <Moment iso={a.status.last_seen} />
          </dd>
          <dt>Connection</dt>
          <dd>{connection(a)}</dd>
          <dt>Handle</dt>
          <dd>
            <OrNone value={a.handle} />
          </dd>
          <dt>Description</dt>
          <dd>
            <OrNone value={a.profile.description} />
          </dd>
          <dt>Endpoints</dt>
          <dd>
            <MonoLines items={a.endpoints.map((e) => e.url)} empty="" />
          </dd>
          <dt>Protocols</dt>
          <dd>
            <Protocols digests={a.protocols} />
          </dd>
          <dt>Metadata</dt>
          <dd>{a.metadata ? <pre>{JSON.stringify(a.metadata, null, 2)}</pre> : <None />}</dd>
          <dt>Registered</dt>
          <dd>
            <Moment iso={a.registered_at} never="" />
          </dd>
          <dt>Almanac</dt>
          <dd>
            {almanac.value === undefined ? (
              '…'
            ) : almanac.value === null ? (
              'not in the Almanac'
            ) : (
              <>
                registered, expires <Moment iso={almanac.value.expiry} />
              </>
            )}
          </dd>
        </dl>
        <h3>Readme</h3>
        <div class="readme" data-testid="readme">
          {a.profile.readme ? (
            <Markdown source={a.profile.readme} />
          ) : (
            <p>
              <None />
            </p>
          )}
        </div>
        <ConfirmButton
          label="Delete agent…"
          question="Delete the agent, its mailbox and pending messages?"
          action="Delete agent"
          onConfirm={removeAgent}
        />{' '}
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
      <A2aPanel address={a.address} />
      <FederationPanel address={a.address} />
      <Mailbox
        agent={a}
        path={path}
        messages={messages.value}
        error={messages.error}
        onDelete={removeMessage}
      />
    </>
  );
}

/** The agent's name and readme as a form; `onDone` says "Saved." or nothing when cancelled. */
function EditAgent(props: { agent: AgentRecord; onDone: (message?: string) => void }) {
  const { agent } = props;
  const [name, setName] = useState(agent.name);
  const [readme, setReadme] = useState(agent.profile.readme);
  const save = useAction();
  return (
    <form
      onSubmit={save.submit(async () => {
        await api('PUT', `/v2/agents/${encode(agent.address)}`, {
          address: agent.address,
          name,
          profile: { ...agent.profile, readme },
        });
        props.onDone('Saved.');
      })}
    >
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
      {save.error && <p class="error">{save.error}</p>}
    </form>
  );
}
