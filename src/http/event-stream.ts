import type { FastifyReply } from 'fastify';
import { RateLimitedError } from '../errors.js';
import type { AccessEnded } from '../services/access-watch.js';

// Server-Sent Events as every stream of the API sends them (docs/activity.md, docs/chat.md):
// a retry hint, a comment every HEARTBEAT_MS so that proxies keep a quiet stream open, one event
// per entry with its id (what Last-Event-ID resumes after), and, when what let the stream open
// no longer holds, a last `end` event saying why (the client should not reconnect).

/** A comment this often keeps proxies from closing a quiet stream. */
const HEARTBEAT_MS = 15_000;
/** A client that reads this far behind is dropped (it resumes with Last-Event-ID). */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
const CONTENT_TYPE = 'text/event-stream; charset=utf-8';

/** Each user's open streams of one kind, against the configured limit. */
export class StreamSlots {
  readonly #open = new Map<string, number>();

  constructor(private readonly limit: number) {}

  /**
   * Takes a slot at once (streams opened together cannot all pass the limit), or answers 429.
   * The function returned gives it back; a second call does nothing.
   */
  take(userId: string): () => void {
    const open = this.#open.get(userId) ?? 0;
    if (open >= this.limit) throw new RateLimitedError(5);
    this.#open.set(userId, open + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const left = (this.#open.get(userId) ?? 1) - 1;
      if (left > 0) this.#open.set(userId, left);
      else this.#open.delete(userId);
    };
  }
}

/** One event: its id (resumable), its name when not the default `message`, its data. */
export interface StreamEvent {
  id: string;
  event?: string;
  data: unknown;
}

export interface EventStream {
  /** Sends an event; a client too far behind is dropped instead. */
  send(event: StreamEvent): void;
  /** Ends the stream, with the reason as its last event when there is one. */
  finish(ended?: AccessEnded): void;
}

export interface EventStreamOpening {
  /** The slot taken for this stream, given back when it ends. */
  release: () => void;
  /** Holds what let the stream open (access.hold); answers the release of that hold. */
  hold: (finish: (ended: AccessEnded) => void) => () => void;
  /** Starts delivering to the stream; answers what stops it. */
  start: (stream: EventStream) => () => void;
}

/** HEAD says whether the stream may be opened, and opens none. */
export async function answerHead(reply: FastifyReply): Promise<void> {
  await reply.code(200).type(CONTENT_TYPE).send();
}

/** Takes the reply over and runs the stream on it until the client, the server or a hold ends it. */
export function openEventStream(reply: FastifyReply, opening: EventStreamOpening): void {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': CONTENT_TYPE,
    'cache-control': 'no-store',
    'x-accel-buffering': 'no',
    'x-content-type-options': 'nosniff',
  });
  res.flushHeaders();
  res.write('retry: 2000\n\n');
  const heartbeat = setInterval(() => res.write(': keep-alive\n\n'), HEARTBEAT_MS);
  heartbeat.unref();
  let finished = false;
  // Set as they are made: the stream may end while either is being made.
  const undo: { stop?: () => void; releaseHold?: () => void } = {};
  const stream: EventStream = {
    send({ id, event, data }) {
      if (finished) return;
      if (res.writableLength > MAX_BUFFERED_BYTES) return stream.finish();
      const name = event === undefined ? '' : `event: ${event}\n`;
      res.write(`id: ${id}\n${name}data: ${JSON.stringify(data)}\n\n`);
    },
    finish(ended) {
      if (finished) return;
      finished = true;
      clearInterval(heartbeat);
      undo.stop?.();
      undo.releaseHold?.();
      opening.release();
      if (!res.writableEnded) {
        if (ended) res.write(`event: end\ndata: ${JSON.stringify(ended)}\n\n`);
        res.end();
      }
    },
  };
  undo.releaseHold = opening.hold((ended) => stream.finish(ended));
  if (finished) {
    undo.releaseHold();
    return;
  }
  undo.stop = opening.start(stream);
  if (finished) undo.stop();
  res.on('close', () => stream.finish());
}
