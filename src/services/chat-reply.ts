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

/**
 * Reads a session's entries after a message was sent, and says when the agent's reply is
 * complete (docs/chat.md, "A reply"): an acknowledgement of the message is not a reply; a
 * message with text or a file is; a streamed reply (start-stream … end-stream) is once it ends;
 * a failure of the message ends the wait. Used by every face that waits for an agent's answer
 * (the MCP chat tool, A2A calls, the command line).
 */
export class ReplyReader {
  private state: ReplyState = 'waiting';
  private streaming = false;
  /** The text the agent said, in order (a streamed reply's chunks joined). */
  private readonly texts: string[] = [];
  /** The agent's entries read, in order. */
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

  /** Takes the next entry of the session; answers the state it leaves the reply in. */
  take(entry: ChatEntry): ReplyState {
    if (this.done) return this.state;
    if (entry.kind === 'failure') {
      if (entry.msg_id === this.msgId) {
        this.failure = entry.detail ?? 'no reason given';
        this.state = 'failed';
      }
      return this.state;
    }
    if (entry.direction !== 'in') return this.state;
    if (entry.kind === 'acknowledgement') {
      if (entry.msg_id === this.msgId) this.acknowledged = true;
      return this.state;
    }
    this.entries.push(entry);
    let said = false;
    let ended = false;
    const content: ChatContent[] =
      entry.content ?? (entry.text === null ? [] : [{ type: 'text', text: entry.text }]);
    for (const part of content) {
      switch (part.type) {
        case 'start-stream':
          this.streaming = true;
          break;
        case 'end-stream':
          this.streaming = false;
          said = true;
          break;
        case 'text':
          this.texts.push(part.text);
          said = true;
          break;
        case 'resource':
          said = true;
          break;
        case 'end-session':
          ended = true;
          break;
        default:
          break;
      }
    }
    if (said && !this.streaming) this.state = 'replied';
    else if (this.streaming) this.state = 'streaming';
    else if (ended) this.state = 'ended';
    return this.state;
  }
}
