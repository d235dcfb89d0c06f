import { request as httpRequest, type Agent as HttpAgent } from 'node:http';
import type { RunningService } from './server.js';

/** A request to the service, with its first user's API key. */
export interface Exchange {
  method: 'GET' | 'POST' | 'PUT';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One request over a kept-alive connection of `connections`; the whole answer read. */
export function exchange(
  service: RunningService,
  connections: HttpAgent,
  { method, path, headers, body }: Exchange,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${service.url}${path}`,
      {
        method,
        headers: {
          authorization: `Bearer ${service.apiKey}`,
          ...(body !== undefined && { 'content-type': 'application/json' }),
          ...headers,
        },
        agent: connections,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The answer's JSON when its status is `status`; fails the scenario otherwise. */
export async function expectJson(
  answer: Promise<Answer>,
  status: number,
  what: string,
): Promise<Record<string, unknown>> {
  const { status: got, text } = await answer;
  if (got !== status) throw new Error(`${what} answered ${got}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as Record<string, unknown>;
}
