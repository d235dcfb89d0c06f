import type { ChatContent, ChatEntry } from '../wire/chat.js';

/** What a reply has come to, entry by entry. */
export type ReplyState =
  /** Nothing from the agent yet beyond, perhaps, its acknowledgement. */
  | 'waiting'
  /** A streamed reply has begun and not ended. */
  | 'streaming'
  /** The agent said something, or a streamed reply ended: the reply is complete. */
  | 'replied'
  /** The message did not reach the agent. */
  | 'failed'
  /** The agent ended the session without a word. */
  | 'ended';

/** One thing an agent's message says, in order, for a face to show. */
export type ReplyPiece =
  /** Text: a whole message's, or (`streamed`) a chunk of a streamed reply. */
  | { kind: 'text'; text: string; streamed: boolean }
  /** A file, as the protocol's resource names it. */
  | { kind: 'file'; uri: string }
  /** A streamed reply ended. */
  | { kind: 'stream-end' }
  /** The agent ended the session. */
  | { kind: 'session-end' };

/**
 * Reads a session's entries after a message was sent, and says when the agent's reply is
 * complete (docs/chat.md, "Waiting for a reply"): an acknowledgement of the message is not a
 * reply; a message with text or a file is; a streamed reply (start-stream … end-stream) is once
 * it ends; a failure of the message ends the wait. Every face that waits for an agent's answer
 * reads through it (the MCP chat tool, the command line); what an entry says comes out as
 * pieces, read on after the reply for a face that keeps following.
 */
export class ReplyReader {
  private state: ReplyState = 'waiting';
  /** Inside a streamed reply (between its start-stream and end-stream). */
  private streaming = false;
  /** The text the reply said, in order (a streamed reply's chunks joined). */
  private readonly texts: string[] = [];
  /** The agent's messages that made the reply, in order. */
  readonly entries: ChatEntry[] = [];
  acknowledged = false;
  failure: string | null = null;

  constructor(private readonly msgId: string) {}

  get outcome(): ReplyState {
    return this.state;
  }

  /** Whether the wait is over. */
  get done(): boolean {
    return this.state === 'replied' || this.state === 'failed' || this.state === 'ended';
  }

  /** The reply's text, joined; null when the agent said no text. */
  get text(): string | null {
    return this.texts.length === 0 ? null : this.texts.join('');
  }

  /**
   * Takes the next entry of the session; answers what the agent's message says (nothing for
   * other entries). The reply's state moves until the wait is over.
   */
  take(entry: ChatEntry): ReplyPiece[] {
    const open = !this.done;
    if (entry.kind === 'failure') {
      if (open && entry.msg_id === this.msgId) {
        this.failure = entry.detail ?? 'no reason given';
        this.state = 'failed';
      }
      return [];
    }
    if (entry.direction !== 'in') return [];
    if (entry.kind === 'acknowledgement') {
      if (entry.msg_id === this.msgId) this.acknowledged = true;
      return [];
    }
    const pieces: ReplyPiece[] = [];
    let said = false;
    const content: ChatContent[] =
      entry.content ?? (entry.text === null ? [] : [{ type: 'text', text: entry.text }]);
    for (const part of content) {
      switch (part.type) {
        case 'start-stream':
          this.streaming = true;
          break;
        case 'end-stream':
          this.streaming = false;
          pieces.push({ kind: 'stream-end' });
          said = true;
          break;
        case 'text':
          pieces.push({ kind: 'text', text: part.text, streamed: this.streaming });
          said = true;
          break;
        case 'resource':
          for (const resource of [part.resource].flat()) {
            pieces.push({ kind: 'file', uri: resource.uri });
          }
          said = true;
          break;
        case 'end-session':
          pieces.push({ kind: 'session-end' });
          break;
        default:
          break;
      }
    }
    if (!open) return pieces;
    this.entries.push(entry);
    for (const piece of pieces) if (piece.kind === 'text') this.texts.push(piece.text);
    if (said && !this.streaming) this.state = 'replied';
    else if (this.streaming) this.state = 'streaming';
    else if (pieces.some((piece) => piece.kind === 'session-end')) this.state = 'ended';
    return pieces;
  }
}
