// Small pieces the console and the inspector pages share.

import { useEffect, useState } from 'preact/hooks';
import {
  ago,
  clock,
  encode,
  ownAgentNames,
  protocolManifest,
  when,
  type AgentStatus,
  type AgentStatusName,
} from './api';

/** A button for what cannot be undone: it asks first, then acts or is kept. */
export function ConfirmButton(props: {
  /** The button before it asks, such as "Delete agent…". */
  label: string;
  question: string;
  /** The button that acts, such as "Delete agent". */
  action: string;
  onConfirm: () => void;
}) {
  const [asked, setAsked] = useState(false);
  return asked ? (
    <span class="confirm">
      {props.question}{' '}
      <button type="button" class="danger" onClick={props.onConfirm}>
        {props.action}
      </button>{' '}
      <button type="button" class="secondary" onClick={() => setAsked(false)}>
        Keep it
      </button>
    </span>
  ) : (
    <button type="button" class="secondary" onClick={() => setAsked(true)}>
      {props.label}
    </button>
  );
}

/** Lines of code-like text (such as endpoints), one a line; `empty` when none. */
export function MonoLines(props: { items: readonly string[] | undefined; empty?: string }) {
  const items = props.items ?? [];
  if (items.length === 0) return props.empty === undefined ? <None /> : <>{props.empty}</>;
  return (
    <>
      {items.map((item) => (
        <div class="mono" key={item}>
          {item}
        </div>
      ))}
    </>
  );
}

/**
 * A protocol by the name and version of its published manifest ("AgentChatProtocol 0.3.0"),
 * its digest beside it in small type; the digest alone while none is known.
 */
export function Protocol(props: { digest: string }) {
  const [name, setName] = useState<string | undefined>();
  useEffect(() => {
    let current = true;
    void protocolManifest(props.digest).then((m) => {
      if (current && m) setName(`${m.metadata.name} ${m.metadata.version}`);
    });
    return () => {
      current = false;
    };
  }, [props.digest]);
  if (!name) return <div class="mono">{props.digest}</div>;
  return (
    <div class="protocol" data-digest={props.digest}>
      <span class="protocol-name">{name}</span> <span class="mono secondary">{props.digest}</span>
    </div>
  );
}

/** An agent's protocols, one a line, by name where a manifest is known; {@link None} without. */
export function Protocols(props: { digests: readonly string[] | undefined }) {
  const digests = props.digests ?? [];
  if (digests.length === 0) return <None />;
  return (
    <>
      {digests.map((digest) => (
        <Protocol key={digest} digest={digest} />
      ))}
    </>
  );
}

/**
 * An agent address: by its name, linking to its page, when it is one of your agents (the
 * address on hover); else the address (or `short`, an abbreviation of it) as it is.
 */
export function AgentRef(props: { address: string; short?: string }) {
  const [name, setName] = useState<string | undefined>();
  useEffect(() => {
    let current = true;
    ownAgentNames().then(
      (names) => current && setName(names.get(props.address)),
      () => undefined,
    );
    return () => {
      current = false;
    };
  }, [props.address]);
  if (!name) return <span class="mono">{props.short ?? props.address}</span>;
  return (
    <a
      class="agent-ref"
      href={`#/agents/${encode(props.address)}`}
      title={props.address}
      data-address={props.address}
    >
      {name}
    </a>
  );
}

/** The mark beside each status: the word says it, the mark and colour help the eye. */
const STATUS_MARKS: Record<AgentStatusName, string> = {
  active: '●',
  idle: '◐',
  unreachable: '⊘',
  failing: '✖',
  offline: '○',
};

/** An agent's status as a word with a mark and a colour (never the colour alone). */
export function StatusBadge(props: { status: AgentStatusName }) {
  return (
    <span class={`badge badge-${props.status}`} data-status={props.status}>
      <span aria-hidden="true">{STATUS_MARKS[props.status]} </span>
      {props.status}
    </span>
  );
}

/** Why an agent has its status: in the colour of failure when it is failing or unreachable, muted otherwise. */
export function StatusReason(props: { status: AgentStatus }) {
  const { status, reason } = props.status;
  if (!reason) return null;
  return <span class={`reason reason-${status}`}>{reason}</span>;
}

/**
 * The one way the console shows a time: how long ago (or until), with the exact time (ISO 8601,
 * UTC) on hover; `never` when there is none (or {@link None} when `never` is empty). Where
 * moments follow each other by seconds (log lines, a conversation), `clock` shows the time of
 * day in UTC instead, to the second or (`clock="minutes"`) the minute.
 */
export function Moment(props: {
  iso: string | null | undefined;
  never?: string;
  clock?: 'seconds' | 'minutes';
}) {
  if (!props.iso) return props.never === '' ? <None /> : <>{props.never ?? 'never'}</>;
  return (
    <time dateTime={props.iso} title={when(props.iso)}>
      {props.clock ? clock(props.iso, props.clock === 'seconds') : ago(props.iso)}
    </time>
  );
}

/** The one way the console shows that there is no value. */
export function None() {
  return <span class="none">none</span>;
}

/** A value, or {@link None} when it is missing or empty. */
export function OrNone(props: { value: string | null | undefined }) {
  return props.value ? <>{props.value}</> : <None />;
}

/** A button that copies `text` (an address, a key) and says so for a moment. */
export function Copy(props: { text: string; what: string }) {
  const [copied, setCopied] = useState<boolean | undefined>();
  const copy = () => {
    navigator.clipboard.writeText(props.text).then(
      () => setCopied(true),
      () => setCopied(false),
    );
    setTimeout(() => setCopied(undefined), 2000);
  };
  return (
    <button type="button" class="copy secondary" aria-label={`Copy ${props.what}`} onClick={copy}>
      {copied === undefined ? 'Copy' : copied ? 'Copied' : 'Select and copy'}
    </button>
  );
}

/** The pages of one agent, as the tabs above them. */
const AGENT_TABS = [
  ['', 'Overview'],
  ['/activity', 'Activity'],
  ['/chat', 'Chat'],
] as const;

export type AgentTab = (typeof AGENT_TABS)[number][1];

/** The tabs of an agent's pages (links: each is a page of its own), the current one marked. */
export function AgentTabs(props: { address: string; current: AgentTab }) {
  const base = `#/agents/${encode(props.address)}`;
  return (
    <nav class="tabs agent-tabs" aria-label="Agent pages">
      {AGENT_TABS.map(([path, label]) => (
        <a
          key={label}
          class="tab"
          href={`${base}${path}`}
          aria-current={label === props.current ? 'page' : undefined}
        >
          {label}
        </a>
      ))}
    </nav>
  );
}
