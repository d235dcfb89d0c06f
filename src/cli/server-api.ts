import { CommandError, EXIT_FAULT, EXIT_NO_SERVER, EXIT_USAGE } from './errors.js';

/**
 * The HTTP API of a running Agentry, for the commands that talk to one (`chat`) rather than
 * open its database: JSON calls with a user API key, and Server-Sent Events streams read the
 * way a browser's EventSource reads them.
 */

/** How long a JSON call may take before the server is said not to answer. */
const CALL_TIMEOUT_MS = 60_000;

/** One event of a Server-Sent Events stream. */
export interface ServerEvent {
  /** `event:`; `message` when the server named none. */
  event: string;
  /** `id:`, when the event had one. */
  id: string | undefined;
  data: string;
}

export interface ServerApiOptions {
  /** The server's base URL, such as http://127.0.0.1:8000 */
  url: string;
  /** A user API key, sent as `Authorization: Bearer`. */
  key: string;
  /** A team of the key's user to act for (`x-team`). */
  team?: string | undefined;
}

/** The `detail` of an error answer, in words (a validation error's items joined). */
function detailOf(body: unknown, status: number): string {
  const detail = (body as { detail?: unknown } | null)?.detail;
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((item: { loc?: unknown[]; msg?: string }) =>
        [item.loc?.join('.'), item.msg].filter(Boolean).join(': '),
      )
      .join('; ');
  }
  return `status ${status}`;
}

export class ServerApi {
  readonly url: string;
  private readonly headers: Record<string, string>;

  constructor(options: ServerApiOptions) {
    this.url = options.url.replace(/\/+$/, '');
    this.headers = {
      authorization: `Bearer ${options.key}`,
      ...(options.team ? { 'x-team': options.team } : {}),
    };
  }

  /** The sentence for a server that cannot be reached. */
  private unreachable(err: unknown): CommandError {
    const timedOut = err instanceof Error && err.name === 'TimeoutError';
    return new CommandError(
      timedOut
        ? `the server at ${this.url} did not answer within ${CALL_TIMEOUT_MS / 1000} seconds`
        : `the server at ${this.url} does not answer (is "agentry serve" running there? give its address with --url or AGENTRY_PUBLIC_URL)`,
      EXIT_NO_SERVER,
      { cause: err },
    );
  }

  /**
   * A refusal in a sentence: `doing` says what was asked (`cannot open a session with X`),
   * the server's detail says why. A key refused says how to give another; a server error
   * other than 503 (which says what is missing) is a fault.
   */
  refusal(doing: string, status: number, body: unknown): CommandError {
    const detail = detailOf(body, status);
    if (status === 401) {
      return new CommandError(
        `the server at ${this.url} refused the API key (${detail}): give a user's key with --key or AGENTRY_API_KEY`,
        EXIT_USAGE,
      );
    }
    return new CommandError(
      `${doing}: ${detail}`,
      status >= 500 && status !== 503 ? EXIT_FAULT : EXIT_USAGE,
    );
  }

  /** Calls the API and answers the JSON body; a refusal is a {@link CommandError}. */
  async call<T>(doing: string, method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    let res: Response;
    try {
      res = await fetch(`${this.url}${path}`, {
        method,
        headers: {
          ...this.headers,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? null : JSON.stringify(body),
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      });
    } catch (err) {
      throw this.unreachable(err);
    }
    const text = await res.text().catch((err: unknown) => {
      throw this.unreachable(err);
    });
    let answer: unknown;
    try {
      answer = text === '' ? null : JSON.parse(text);
    } catch {
      answer = { detail: text.slice(0, 200) };
    }
    if (!res.ok) throw this.refusal(doing, res.status, answer);
    return answer as T;
  }

  /**
   * Opens the stream at `path`, resuming after the event id `after` (none: from the start),
   * and yields its events until the server ends it or `signal` aborts. A refusal is a
   * {@link CommandError}; a connection that breaks ends the events (the caller resumes).
   */
  async *stream(
    doing: string,
    path: string,
    after: string | undefined,
    signal: AbortSignal,
  ): AsyncGenerator<ServerEvent> {
    let res: Response;
    try {
      res = await fetch(`${this.url}${path}`, {
        headers: {
          ...this.headers,
          accept: 'text/event-stream',
          ...(after ? { 'last-event-id': after } : {}),
        },
        signal,
      });
    } catch (err) {
      if (signal.aborted) return;
      throw this.unreachable(err);
    }
    if (!res.ok) {
      const text = await res.text().catch(() => '');
      let answer: unknown;
      try {
        answer = JSON.parse(text);
      } catch {
        answer = { detail: text.slice(0, 200) };
      }
      throw this.refusal(doing, res.status, answer);
    }
    if (!res.body) return;
    try {
      yield* parseEvents(res.body as unknown as AsyncIterable<Uint8Array>);
    } catch {
      // Aborted by this side, or the connection broke: the events end here.
    }
  }
}

/**
 * The events of a Server-Sent Events body, as the specification reads them: lines end with
 * LF, CR or CRLF, a blank line ends an event, `:` starts a comment, and an event without
 * `data` is none.
 */
export async function* parseEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<ServerEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  let event = '';
  let id: string | undefined;
  let data: string[] = [];
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    for (;;) {
      const end = buffer.search(/\r\n|\r|\n/);
      // A CR at the end of the buffer may be the first half of a CRLF: wait for more.
      if (end < 0 || (buffer[end] === '\r' && end === buffer.length - 1)) break;
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + (buffer.startsWith('\r\n', end) ? 2 : 1));
      if (line === '') {
        if (data.length > 0) yield { event: event || 'message', id, data: data.join('\n') };
        event = '';
        data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
      else if (field === 'id' && !value.includes('\0')) id = value;
    }
  }
}
