import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { TestIdentity } from './uagent.js';
import { closeNow, listenOnLoopback } from './loopback.js';

export interface LocalAgentOptions {
  /** The Agentry this agent is configured with (its "agentverse" URL). */
  agentry: string;
  identity?: TestIdentity;
  name?: string;
  readme?: string;
  metadata?: Record<string, unknown>;
}

/** What the agent did against Agentry for one /connect or /disconnect. */
export interface LocalAgentCall {
  path: '/connect' | '/disconnect';
  body: Record<string, unknown>;
  answer: { success: boolean; detail?: string | null };
}

const CORS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, POST, OPTIONS',
  'access-control-allow-headers': '*',
  'access-control-allow-credentials': 'false',
};

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  } catch {
    return {};
  }
}

/**
 * A stand-in for a running uAgent's local server with its inspector endpoints: `/agent_info`,
 * `/messages`, and `/connect` and `/disconnect`, which register or unregister the agent with
 * Agentry using the user token they are given (challenge, signed proof, registration), as the
 * uAgents client does. Answers carry permissive CORS headers, as that server's do.
 */
export class LocalAgent {
  readonly identity: TestIdentity;
  readonly calls: LocalAgentCall[] = [];
  url = '';
  private server: Server | undefined;

  constructor(private readonly options: LocalAgentOptions) {
    this.identity = options.identity ?? TestIdentity.random();
  }

  get address(): string {
    return this.identity.address;
  }

  /**
   * The inspector link the agent prints at start-up, with its URL quoted the same way; on
   * another service when `base` is given.
   */
  inspectorLink(base = this.options.agentry): string {
    const quoted = encodeURIComponent(this.url).replace(/%2F/g, '/');
    return `${base}/inspect/?uri=${quoted}&address=${this.address}`;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        this.send(res, 500, { error: String(err) });
      });
    });
    this.url = await listenOnLoopback(this.server);
    return this;
  }

  async close(): Promise<void> {
    if (!this.server) return;
    await closeNow(this.server);
  }

  private send(res: ServerResponse, status: number, body?: unknown): void {
    res.writeHead(status, { ...CORS, 'content-type': 'application/json' });
    res.end(body === undefined ? '' : JSON.stringify(body));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'OPTIONS') {
      res.writeHead(204, CORS);
      res.end();
      return;
    }
    if (req.method === 'GET' && path === '/agent_info') {
      this.send(res, 200, {
        address: this.address,
        prefix: 'test-agent',
        endpoints: [{ url: `${this.url}/submit`, weight: 1 }],
        protocols: [],
        metadata: this.options.metadata ?? {},
        agent_type: 'custom',
        port: Number(new URL(this.url).port),
      });
      return;
    }
    if (req.method === 'GET' && path === '/messages') {
      this.send(res, 200, { envelopes: [] });
      return;
    }
    if (req.method === 'POST' && (path === '/connect' || path === '/disconnect')) {
      const body = await readJson(req);
      const answer = path === '/connect' ? await this.connect(body) : await this.disconnect(body);
      this.calls.push({ path, body, answer });
      this.send(res, 200, answer);
      return;
    }
    this.send(res, 404, { error: 'not found' });
  }

  private async agentry(
    method: string,
    path: string,
    token: unknown,
    body?: unknown,
    team?: unknown,
  ): Promise<{ ok: boolean; data: any }> {
    // As uagents' mailbox client: the team of the /connect request goes as x-team on each call.
    const headers: Record<string, string> = {
      authorization: `Bearer ${String(token)}`,
      'content-type': 'application/json',
    };
    if (typeof team === 'string' && team) headers['x-team'] = team;
    const res = await fetch(`${this.options.agentry}${path}`, {
      method,
      headers,
      body: body === undefined ? null : JSON.stringify(body),
    });
    return { ok: res.ok, data: await res.json() };
  }

  private async connect(
    body: Record<string, unknown>,
  ): Promise<{ success: boolean; detail?: string | null }> {
    const token = body.user_token;
    const team = body.team;
    const issued = await this.agentry(
      'GET',
      `/v2/identity/${this.address}/challenge`,
      token,
      undefined,
      team,
    );
    if (!issued.ok) return { success: false, detail: issued.data.detail };
    const challenge = issued.data.challenge as string;
    const proof = await this.agentry(
      'POST',
      '/v2/identity',
      token,
      {
        address: this.address,
        challenge,
        challenge_response: this.identity.signChallenge(challenge),
      },
      team,
    );
    if (!proof.ok) return { success: false, detail: proof.data.detail };
    const registered = await this.agentry(
      'POST',
      '/v2/agents',
      token,
      {
        address: this.address,
        name: this.options.name ?? `agent ${this.address.slice(-6)}`,
        handle: null,
        url: body.endpoint ?? null,
        profile: { description: '', readme: this.options.readme ?? '' },
        endpoints: [{ url: `${this.url}/submit`, weight: 1 }],
        protocols: [],
        metadata: this.options.metadata ?? {},
      },
      team,
    );
    if (!registered.ok) return { success: false, detail: registered.data.detail };
    return { success: true, detail: null };
  }

  private async disconnect(
    body: Record<string, unknown>,
  ): Promise<{ success: boolean; detail?: string | null }> {
    const removed = await this.agentry(
      'DELETE',
      `/v2/agents/${this.address}`,
      body.user_token,
      undefined,
      body.team,
    );
    return removed.ok
      ? { success: true, detail: null }
      : { success: false, detail: removed.data.detail };
  }
}
