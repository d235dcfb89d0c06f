import { request, type Dispatcher } from 'undici';

/** The largest answer read from a peer or upstream: an Almanac record is a few kilobytes. */
const ANSWER_LIMIT_BYTES = 256 * 1024;

/** An exchange with a peer or upstream that gave nothing usable, in words for the operator. */
export class ExchangeFault extends Error {
  override readonly name = 'ExchangeFault';
}

export interface Exchanged {
  status: number;
  /** The answer parsed as JSON; undefined when it had none or was not JSON. */
  body: unknown;
}

/**
 * One JSON request to a peer or upstream, its answer read whole within `timeoutMs`: a peer
 * that is down, slow or answers without end is an {@link ExchangeFault}, never a wait longer
 * than the bound.
 */
export async function exchange(
  dispatcher: Dispatcher,
  url: string,
  options: {
    method: 'GET' | 'POST';
    headers?: Record<string, string>;
    body?: unknown;
    timeoutMs: number;
  },
): Promise<Exchanged> {
  const signal = AbortSignal.timeout(options.timeoutMs);
  try {
    const response = await request(url, {
      method: options.method,
      headers: {
        accept: 'application/json',
        ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...options.headers,
      },
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      dispatcher,
      signal,
    });
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of response.body) {
      size += (chunk as Buffer).length;
      if (size > ANSWER_LIMIT_BYTES) {
        response.body.destroy();
        throw new ExchangeFault(`answered more than ${ANSWER_LIMIT_BYTES} bytes`);
      }
      chunks.push(chunk as Buffer);
    }
    let body: unknown;
    try {
      body = size === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      body = undefined;
    }
    return { status: response.statusCode, body };
  } catch (err) {
    if (err instanceof ExchangeFault) throw err;
    if (signal.aborted) throw new ExchangeFault(`did not answer within ${options.timeoutMs} ms`);
    const code = (err as { code?: string }).code;
    throw new ExchangeFault(`could not be reached (${code ?? (err as Error).message})`);
  }
}
