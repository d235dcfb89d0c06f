import { createServer, type Server as HttpServer } from 'node:http';
import type { EnvelopeFields } from '../../src/crypto/index.js';
import { closeNow } from './loopback.js';

/**
 * How the endpoint answers one request: a status code, `hang` (never: the proxy times out)
 * or `hold` (when the test releases it, with 200).
 */
export type Answer = number | 'hang' | 'hold';

/**
 * A proxy agent's own HTTP endpoint on a loopback port that tests take down (connections to
 * it are refused) and bring back on the same port, and whose answers they script: each request
 * takes the next answer of `script`, then 200.
 */
export class AgentEndpoint {
  /** The bodies received, in order. */
  readonly received: string[] = [];
  script: Answer[] = [];
  /** Answers of held requests, waiting for the test. */
  readonly held: (() => void)[] = [];
  /** How long each answer takes. */
  delayMs = 0;
  private server: HttpServer | undefined;

  private constructor(private port: number) {}

  /** An endpoint that is down, on a port of its own. */
  static async down(): Promise<AgentEndpoint> {
    const endpoint = new AgentEndpoint(0);
    await endpoint.up();
    await endpoint.stop();
    return endpoint;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/submit`;
  }

  async up(): Promise<void> {
    const server = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        this.received.push(body);
        const answer = this.script.shift() ?? 200;
        if (answer === 'hang') return;
        const send = (status: number) =>
          setTimeout(
            () => response.writeHead(status, { 'content-type': 'application/json' }).end('{}'),
            this.delayMs,
          );
        if (answer === 'hold') this.held.push(() => send(200));
        else send(answer);
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', resolve);
    });
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  async stop(): Promise<void> {
    if (this.server) await closeNow(this.server);
    this.server = undefined;
  }

  /** How many times `envelope` was received. */
  copiesOf(envelope: EnvelopeFields): number {
    return this.received.filter((body) => JSON.parse(body).signature === envelope.signature).length;
  }
}
