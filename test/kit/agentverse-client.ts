import { call, type JsonResponse } from './http.js';

/**
 * Requests as the generated Agentverse client sends them (fetchai/api-clients,
 * `agentverse-client`, the aio flavour): `Accept: application/json` and its user agent on every
 * call, a body written by Python's `json.dumps` (`", "` and `": "` between items, non-ASCII
 * escaped) with `Content-Type: application/json`, and path parameters quoted with nothing safe.
 */

const USER_AGENT = 'OpenAPI-Generator/1.0.0/python';

/** `json.dumps(value)` with its default separators and `ensure_ascii`. */
export function pythonJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    const items = Object.entries(value).map(([k, v]) => `${pythonJson(k)}: ${pythonJson(v)}`);
    return `{${items.join(', ')}}`;
  }
  return JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** `urllib.parse.quote(value, safe='')`. */
export function quotePath(value: string): string {
  return encodeURIComponent(value).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** One call of the generated client; `authorization` is the header the caller configured. */
export function clientCall(
  base: string,
  method: string,
  path: string,
  options: { body?: unknown; authorization?: string } = {},
): Promise<JsonResponse<any>> {
  const headers: Record<string, string> = { accept: 'application/json', 'user-agent': USER_AGENT };
  if (options.authorization !== undefined) headers.authorization = options.authorization;
  if (options.body === undefined) return call(base, method, path, { headers });
  headers['content-type'] = 'application/json';
  return call(base, method, path, { headers, rawBody: pythonJson(options.body) });
}
