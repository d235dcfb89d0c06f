import { useEffect, useRef, useState } from 'preact/hooks';
import {
  api,
  ApiError,
  encode,
  ownAgentNames,
  type AgentRecord,
  type ChatEntry,
  type ChatSession,
  type SendChatAnswer,
} from '../api';
import { assemble, CHAT_TEXT_MAX_LENGTH, ordered, type Bubble } from '../chat';
import { messageOf, useAction, useLoad } from '../hooks';
import { useEventStream, type LiveState } from '../stream';
import { AgentTabs, Moment } from '../widgets';

/** The events of a session's stream, each named by the kind of its entry. */
const CHAT_EVENTS = ['message', 'acknowledgement', 'failure'] as const;

/** A history is read this many entries at a time (the most the API gives). */
const HISTORY_PAGE = 200;

const LIVE_TEXT: Record<LiveState, string> = {
  connecting: 'Connecting…',
  live: 'Live: replies appear as they arrive',
  reconnecting: 'Reconnecting…',
  ended: 'Stopped',
};

/** Where an agent's chat is, or one session of it. */
export function chatHref(agent: string, session?: string): string {
  return `#/agents/${encode(agent)}/chat${session ? `/${encode(session)}` : ''}`;
}

/** One of the user's agents, or null for an agent that is not theirs (chatted with all the same). */
function loadAgent(address: string): Promise<AgentRecord | null> {
  return api<AgentRecord>('GET', `/v2/agents/${encode(address)}`).catch((err: unknown) => {
    if (err instanceof ApiError && err.status === 404) return null;
    throw err;
  });
}

/** The session a chat page shows, and the last one with the agent when it has ended. */
interface Chosen {
  /** The agent and session asked for (the page's props), so that a stale answer is not shown. */
  for: string;
  session: ChatSession | null;
  lastEnded?: ChatSession;
}

/**
 * The Chat tab of an agent: the session the link names, or else the latest one with the
 * agent that is still open (a new one is opened with the first message), what was said in it,
 * a box to say more, and the replies as they arrive.
 */
export function AgentChatPage(props: { address: string; session?: string }) {
  const { address } = props;
  const agent = useLoad(() => loadAgent(address), [address]);
  const asked = `${address} ${props.session ?? ''}`;
  const chosen = useLoad(async (): Promise<Chosen> => {
    if (props.session) {
      const path = `/v2/chat/sessions/${encode(props.session)}`;
      return { for: asked, session: await api<ChatSession>('GET', path) };
    }
    const [latest] = await api<ChatSession[]>(
      'GET',
      `/v2/chat/sessions?agent=${encode(address)}&limit=1`,
    );
    if (latest && latest.ended_at === null) return { for: asked, session: latest };
    return { for: asked, session: null, ...(latest ? { lastEnded: latest } : {}) };
  }, [asked]);
  const current = chosen.value?.for === asked ? chosen.value : undefined;
  if (agent.error) return <p class="error">{agent.error}</p>;
  if (agent.value === undefined) return <p>Loading…</p>;
  const name = agent.value?.name || address;
  return (
    <>
      {agent.value && <AgentTabs address={address} current="Chat" />}
      <section class="card chat" aria-labelledby="chat-heading">
        <h2 id="chat-heading">
          Chat with{' '}
          {agent.value ? <a href={`#/agents/${encode(address)}`}>{name}</a> : <span>{name}</span>}
        </h2>
        {agent.value && <p class="mono">{address}</p>}
        {chosen.error && <p class="error">{chosen.error}</p>}
        {!current && !chosen.error && <p>Loading…</p>}
        {current && (
          <Conversation
            key={asked}
            address={address}
            agentName={name}
            initial={current}
            named={props.session !== undefined}
          />
        )}
      </section>
    </>
  );
}

/**
 * What was said in a session, live, with the box to say more. Without a session yet, the
 * first message opens one.
 */
function Conversation(props: {
  address: string;
  agentName: string;
  initial: Chosen;
  /** Whether the page's link names the session (a new one is then opened elsewhere). */
  named: boolean;
}) {
  const { address, agentName } = props;
  const [session, setSession] = useState<ChatSession | null>(props.initial.session);
  const [entries, setEntries] = useState<ChatEntry[]>([]);
  /** Where the stream starts: after the last entry of the history; undefined until it is read. */
  const [start, setStart] = useState<string | undefined>();
  const [historyError, setHistoryError] = useState<string | undefined>();
  const [text, setText] = useState('');
  /** Why this session may be read and not written to, as the server said it (a 403). */
  const [refused, setRefused] = useState<string | undefined>();
  const [announcement, setAnnouncement] = useState('');
  /** The session made here by a first message: its history is what is sent from now on. */
  const opened = useRef<string | undefined>();
  const box = useRef<HTMLTextAreaElement>(null);
  const log = useRef<HTMLOListElement>(null);

  const add = (more: ChatEntry[]) =>
    setEntries((shown) => (more.length === 0 ? shown : ordered([...shown, ...more])));

  // The history, page after page, then the stream from after its last entry.
  useEffect(() => {
    setStart(undefined);
    setHistoryError(undefined);
    if (!session) {
      setEntries([]);
      return;
    }
    if (opened.current === session.id) {
      setStart('');
      return;
    }
    let live = true;
    (async () => {
      const all: ChatEntry[] = [];
      let after = '';
      for (;;) {
        const query = `limit=${HISTORY_PAGE}${after ? `&after=${after}` : ''}`;
        const page = await api<ChatEntry[]>(
          'GET',
          `/v2/chat/sessions/${encode(session.id)}/messages?${query}`,
        );
        all.push(...page);
        if (page.length < HISTORY_PAGE) break;
        after = page[page.length - 1]!.id;
      }
      return all;
    })().then(
      (all) => {
        if (!live) return;
        setEntries(ordered(all));
        setStart(all[all.length - 1]?.id ?? '');
      },
      (err: unknown) => live && setHistoryError(messageOf(err)),
    );
    return () => {
      live = false;
    };
  }, [session?.id]);

  const status = useEventStream<ChatEntry>(
    session && start !== undefined ? `/v2/chat/sessions/${encode(session.id)}/stream` : undefined,
    start,
    (entry) => add([entry]),
    CHAT_EVENTS,
  );

  const bubbles = assemble(entries);

  // What arrives is announced: replies once whole, receipts and failures of what was sent.
  const seen = useRef<Map<string, Bubble> | undefined>();
  useEffect(() => {
    if (start === undefined) return;
    const before = seen.current;
    seen.current = new Map(bubbles.map((b) => [b.key, { ...b }]));
    if (!before) return;
    const told: string[] = [];
    for (const b of bubbles) {
      const was = before.get(b.key);
      if (b.from === 'agent') {
        if (b.streaming && !was) told.push(`${agentName} is replying…`);
        else if (!b.streaming && (!was || was.streaming)) told.push(`${agentName}: ${b.text}`);
      } else if (b.delivery !== was?.delivery || (b.failure && !was?.failure)) {
        if (b.failure) told.push(b.failure);
        else if (b.delivery === 'received') told.push('Your message was received.');
      }
      if (b.from === 'note' && !was && !b.failure) told.push(b.text);
    }
    if (told.length > 0) setAnnouncement(told.join(' '));
  }, [entries, start]);

  // The newest stays in view while the reader is at the bottom.
  const atBottom = useRef(true);
  useEffect(() => {
    const el = log.current;
    if (el && atBottom.current) el.scrollTop = el.scrollHeight;
  }, [entries]);

  const sending = useAction({
    explain: (err) => {
      if (err instanceof ApiError && err.status === 403) {
        setRefused(err.message);
        return `Not sent: ${err.message}`;
      }
      if (err instanceof ApiError && err.status === 409 && session) {
        void api<ChatSession>('GET', `/v2/chat/sessions/${encode(session.id)}`).then(setSession);
      }
      return `Not sent: ${messageOf(err)}`;
    },
  });
  const send = sending.submit(async () => {
    if (text.trim() === '') throw new Error('Type a message first');
    let current = session;
    if (!current) {
      current = await api<ChatSession>('POST', '/v2/chat/sessions', { agent: address });
      opened.current = current.id;
      setSession(current);
    }
    const answer = await api<SendChatAnswer>(
      'POST',
      `/v2/chat/sessions/${encode(current.id)}/messages`,
      { text },
    );
    setText('');
    add(answer.failure ? [answer.message, answer.failure] : [answer.message]);
    box.current?.focus();
  });

  const ending = useAction({ explain: (err) => `The session was not ended: ${messageOf(err)}` });
  const end = () =>
    ending.run(async () => {
      if (!session) return;
      setSession(await api<ChatSession>('POST', `/v2/chat/sessions/${encode(session.id)}/end`));
    });
  const startAnew = () => {
    if (props.named) {
      location.hash = chatHref(address);
      return;
    }
    opened.current = undefined;
    setSession(null);
    setText('');
    setRefused(undefined);
    seen.current = undefined;
  };

  const ended = session?.ended_at != null;
  const disabledBecause = ended
    ? 'This session has ended: nothing more can be sent in it.'
    : refused
      ? `You can read this session but not send in it: ${refused}`
      : undefined;
  const lastEnded = props.initial.lastEnded;

  return (
    <>
      <div class="filters">
        <span data-testid="chat-session">
          {session ? (
            <>
              Session opened <Moment iso={session.created_at} />
              {ended && (
                <>
                  , ended <Moment iso={session.ended_at} />
                </>
              )}
            </>
          ) : (
            'A new session: your first message opens it.'
          )}
        </span>
        {session && !ended && (
          <button type="button" class="secondary" disabled={ending.busy} onClick={end}>
            End session
          </button>
        )}
        {ended && (
          <button type="button" onClick={startAnew}>
            New session
          </button>
        )}
        <span class={`live live-${status.state}`} role="status" data-testid="live">
          {session && start !== undefined
            ? status.detail
              ? `${LIVE_TEXT[status.state]}: ${status.detail}`
              : LIVE_TEXT[status.state]
            : ''}
        </span>
      </div>
      {!session && lastEnded && (
        <p class="status">
          Your last session with this agent ended <Moment iso={lastEnded.ended_at} />:{' '}
          <a href={chatHref(address, lastEnded.id)}>read it</a>.
        </p>
      )}
      {ending.error && <p class="error">{ending.error}</p>}
      {historyError && <p class="error">{historyError}</p>}
      {session && start === undefined && !historyError && <p>Loading the conversation…</p>}
      <p class="visually-hidden" aria-live="polite" data-testid="announcer">
        {announcement}
      </p>
      {bubbles.length > 0 && (
        <ol
          class="chat-log"
          ref={log}
          tabIndex={0}
          aria-label="Conversation, oldest first"
          data-testid="conversation"
          onScroll={(e) => {
            const el = e.currentTarget;
            atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
          }}
        >
          {bubbles.map((b) => (
            <BubbleItem key={b.key} bubble={b} agentName={agentName} />
          ))}
        </ol>
      )}
      {session && start !== undefined && bubbles.length === 0 && (
        <p class="status">Nothing said yet.</p>
      )}
      <form class="chat-send" onSubmit={send}>
        <label for="chat-text">Message to {agentName}</label>
        <textarea
          id="chat-text"
          name="text"
          ref={box}
          rows={3}
          maxLength={CHAT_TEXT_MAX_LENGTH}
          value={text}
          disabled={disabledBecause !== undefined}
          aria-describedby={disabledBecause ? 'chat-why' : 'chat-hint'}
          onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
              e.preventDefault();
              (e.currentTarget as HTMLTextAreaElement).form?.requestSubmit();
            }
          }}
        />
        <div class="filters">
          <button type="submit" disabled={disabledBecause !== undefined || sending.busy}>
            Send
          </button>
          {disabledBecause ? (
            <span id="chat-why" class="status" data-testid="send-disabled">
              {disabledBecause}
            </span>
          ) : (
            <span id="chat-hint" class="status">
              Enter sends; Shift+Enter starts a new line.
            </span>
          )}
        </div>
        {sending.error && !refused && (
          <p class="error" role="alert">
            {sending.error}
          </p>
        )}
      </form>
    </>
  );
}

/** What became of a message of the person's, as a mark and words (never the colour alone). */
function DeliveryMark(props: { bubble: Bubble }) {
  const { delivery, failure } = props.bubble;
  if (delivery === 'failed') {
    return (
      <p class="delivery delivery-failed" data-testid="delivery">
        <span aria-hidden="true">✖ </span>
        {failure}
      </p>
    );
  }
  return (
    <p class={`delivery delivery-${delivery ?? 'sent'}`} data-testid="delivery">
      {delivery === 'received' ? (
        <>
          <span aria-hidden="true">✓ </span>received
        </>
      ) : (
        'sent'
      )}
    </p>
  );
}

/** One bubble: who said it and when, its text and files, and what became of it. */
function BubbleItem(props: { bubble: Bubble; agentName: string }) {
  const { bubble: b } = props;
  if (b.from === 'note') {
    return (
      <li class={`bubble note${b.failure ? ' failed' : ''}`} data-from="note">
        {b.text}
        {b.failure && <DeliveryMark bubble={b} />}
      </li>
    );
  }
  const who = b.from === 'you' ? 'You' : props.agentName;
  return (
    <li
      class={`bubble ${b.from}${b.delivery === 'failed' ? ' failed' : ''}`}
      data-from={b.from}
      aria-busy={b.streaming ? 'true' : undefined}
    >
      <p class="said">
        <span class="who">{who}</span> <Moment iso={b.at} clock="minutes" />
      </p>
      {b.text && (
        <p class="text" data-testid="text">
          {b.text}
        </p>
      )}
      {b.streaming && <p class="status streaming">{b.text ? 'still writing…' : 'writing…'}</p>}
      {b.files.length > 0 && (
        <ul class="files" aria-label="Files">
          {b.files.map((uri) => (
            <li key={uri} class="mono">
              {uri}
            </li>
          ))}
        </ul>
      )}
      {b.from === 'you' && <DeliveryMark bubble={b} />}
    </li>
  );
}

/** How many sessions the list shows at a time. */
const SESSIONS_PAGE = 50;

/** The user's chat sessions, the most recently active first, each leading to its chat. */
export function ChatSessionsPage() {
  const [sessions, setSessions] = useState<ChatSession[] | undefined>();
  const [more, setMore] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const names = useLoad(ownAgentNames, []);
  const older = useAction();
  const page = (offset: number) =>
    api<ChatSession[]>('GET', `/v2/chat/sessions?limit=${SESSIONS_PAGE}&offset=${offset}`);
  useEffect(() => {
    page(0).then(
      (first) => {
        setSessions(first);
        setMore(first.length === SESSIONS_PAGE);
      },
      (err: unknown) => setError(messageOf(err)),
    );
  }, []);
  const loadMore = () =>
    older.run(async () => {
      const next = await page(sessions?.length ?? 0);
      setSessions((shown) => [...(shown ?? []), ...next]);
      setMore(next.length === SESSIONS_PAGE);
    });
  return (
    <section class="card" aria-labelledby="sessions-heading">
      <h2 id="sessions-heading">Chat</h2>
      <p>
        Your conversations with agents, the most recently active first. To start one, open an agent
        and its <strong>Chat</strong> tab.
      </p>
      {error && <p class="error">{error}</p>}
      {!sessions && !error && <p>Loading sessions…</p>}
      {sessions && sessions.length === 0 && (
        <p>
          No sessions yet. Pick an agent under <a href="#/agents">Agents</a> and say hello in its
          Chat tab.
        </p>
      )}
      {sessions && sessions.length > 0 && (
        <table data-testid="chat-sessions">
          <thead>
            <tr>
              <th>Agent</th>
              <th>Last active</th>
              <th>Opened</th>
              <th>State</th>
            </tr>
          </thead>
          <tbody>
            {sessions.map((s) => {
              const name = names.value?.get(s.agent);
              return (
                <tr key={s.id} data-session={s.id}>
                  <td>
                    <a href={chatHref(s.agent, s.id)}>{name ?? s.agent}</a>
                    {name && <div class="mono">{s.agent}</div>}
                  </td>
                  <td>
                    <Moment iso={s.updated_at} />
                  </td>
                  <td>
                    <Moment iso={s.created_at} />
                  </td>
                  <td>
                    {s.ended_at ? (
                      <>
                        ended <Moment iso={s.ended_at} />
                      </>
                    ) : (
                      'open'
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {older.error && <p class="error">{older.error}</p>}
      {more && (
        <button type="button" class="secondary" disabled={older.busy} onClick={loadMore}>
          Older sessions
        </button>
      )}
    </section>
  );
}
