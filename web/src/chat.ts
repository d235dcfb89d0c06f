// What a chat session's entries read as: the messages of both sides as bubbles, each of the
// person's with what became of it (received by the agent, or not delivered, and why), and
// each streamed reply (start-stream, its chunks, end-stream) as one message that grows.

import type { ChatEntry } from './api';

/** The longest text one message may carry, as the API allows (characters). */
export const CHAT_TEXT_MAX_LENGTH = 16_384;

/** What became of a message the person sent. */
export type Delivery = 'sent' | 'received' | 'failed';

export interface Bubble {
  /** Stable while it grows: the id of its first entry. */
  key: string;
  /** `you`: the person; `agent`: the agent; `note`: the session started or ended. */
  from: 'you' | 'agent' | 'note';
  at: string;
  text: string;
  /** Files the message carries, as their URIs. */
  files: string[];
  /** The person's messages: sent, received (the agent acknowledged it) or failed. */
  delivery?: Delivery;
  /** Why a message was not delivered, in words. */
  failure?: string;
  /** A streamed reply whose end has not come yet. */
  streaming?: boolean;
}

/** The entries in the order they happened (ids are increasing numbers), each once. */
export function ordered(entries: Iterable<ChatEntry>): ChatEntry[] {
  const byId = new Map<string, ChatEntry>();
  for (const entry of entries) byId.set(entry.id, entry);
  return [...byId.values()].sort((a, b) => Number(a.id) - Number(b.id));
}

/**
 * The bubbles of a session's entries (in order): acknowledgements and failures mark the
 * message they are about; chunks of a stream join the bubble its start-stream opened, until
 * its end-stream (the protocol's chunks name no stream: they belong to the one open).
 */
export function assemble(entries: readonly ChatEntry[]): Bubble[] {
  const bubbles: Bubble[] = [];
  /** The person's messages, by their msg_id. */
  const sent = new Map<string, Bubble>();
  let stream: Bubble | undefined;
  for (const entry of entries) {
    if (entry.kind === 'acknowledgement') {
      const about = entry.msg_id === null ? undefined : sent.get(entry.msg_id);
      if (about && about.delivery !== 'failed') about.delivery = 'received';
      continue;
    }
    if (entry.kind === 'failure') {
      const about = entry.msg_id === null ? undefined : sent.get(entry.msg_id);
      const detail = entry.detail ?? 'Not delivered';
      if (about) {
        about.delivery = 'failed';
        about.failure = detail;
      } else {
        bubbles.push({ key: entry.id, from: 'note', at: entry.at, text: detail, files: [] });
      }
      continue;
    }
    const from = entry.direction === 'out' ? 'you' : 'agent';
    let bubble: Bubble | undefined;
    const open = (streaming = false): Bubble => {
      bubble ??= { key: entry.id, from, at: entry.at, text: '', files: [], streaming };
      return bubble;
    };
    const notes: Bubble[] = [];
    for (const part of entry.content ?? []) {
      switch (part.type) {
        case 'text':
          if (from === 'agent' && stream && !bubble) stream.text += part.text;
          else open().text += part.text;
          break;
        case 'resource':
          for (const r of Array.isArray(part.resource) ? part.resource : [part.resource]) {
            open().files.push(r.uri);
          }
          break;
        case 'start-stream':
          if (from === 'agent') {
            stream = { key: entry.id, from, at: entry.at, text: '', files: [], streaming: true };
            bubbles.push(stream);
          }
          break;
        case 'end-stream':
          if (from === 'agent' && stream) {
            stream.streaming = false;
            stream = undefined;
          }
          break;
        case 'end-session':
          notes.push({
            key: `${entry.id}-end`,
            from: 'note',
            at: entry.at,
            text: from === 'you' ? 'You ended the session.' : 'The agent ended the session.',
            files: [],
          });
          break;
        default:
          // start-session and metadata say nothing a person reads.
          break;
      }
    }
    if (bubble) {
      if (from === 'you') bubble.delivery = 'sent';
      bubbles.push(bubble);
    }
    bubbles.push(...notes);
    // What the agent says of a message of the person's (the end of a session too) marks it.
    const marked = bubble ?? notes[0];
    if (from === 'you' && entry.msg_id !== null && marked) sent.set(entry.msg_id, marked);
  }
  return bubbles;
}
