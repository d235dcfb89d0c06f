import { request } from 'node:http';

export interface RawAnswer {
  status: number;
  text: string;
}

/**
 * One request on a connection of its own, closed after the answer: what the uAgents mailbox
 * client does, which opens a new HTTP session for every poll and every delete. `signal`
 * abandons it (the socket is destroyed).
 */
export function requestOnNewConnection(
  url: string,
  options: {
    method: string;
    path: string;
    headers?: Record<string, string>;
    body?: string;
    signal?: AbortSignal;
  },
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...options.headers };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const req = request(
      `${url}${options.path}`,
      { method: options.method, headers, agent: false, signal: options.signal },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}
