import { randomUUID } from 'node:crypto';
import { Agent as HttpAgent, createServer, request, type Server } from 'node:http';
import type { EnvelopeFields } from '../../src/crypto/index.js';
import {
  CHAT_ACKNOWLEDGEMENT_DIGEST,
  CHAT_MESSAGE_DIGEST,
  CHAT_PROTOCOL_DIGEST,
  type ChatContent,
} from '../../src/wire/chat.js';
import { registerAgent } from '../../test/kit/agents.js';
import { closeNow, listenOnLoopback } from '../../test/kit/loopback.js';
import { TestIdentity } from '../../test/kit/uagent.js';
import type { RunningService } from './server.js';

/** What the agent did for one chat message, timed on this process's clock (ms). */
export interface AgentTiming {
  /** The forwarded envelope's body had all come in. */
  receivedAt: number;
  /** The acknowledgement's POST was answered. */
  acknowledgedAt: number;
  /** The reply's POST began (its envelope signed). */
  replyStartedAt: number;
}

export interface BenchChatAgent {
  address: string;
  /** The timing of the reply whose text is the key, until {@link take}n. */
  take(replyText: string): AgentTiming | undefined;
  close(): Promise<void>;
}

/**
 * A chat agent as a uAgents chat agent behaves, for the benchmark: registered under the
 * service's first user as a proxy agent whose URL is its own loopback server, it answers each
 * forwarded envelope 200 at once, then acknowledges each chat message (waiting for the
 * service's answer, as `ctx.send` does) and replies with the message's text after `prefix`,
 * through the service's mailbox submit endpoint, where its sender's chat identity is
 * received. It notes when it received each message and when it began its reply, so that a
 * round trip's time can leave the agent's own share out. Its posts go over kept-alive
 * connections, as the aiohttp session of a uAgents agent does. `listing` adds fields to its
 * registration, such as the `protocols` it lists (none unless given).
 */
export async function startBenchChatAgent(
  service: RunningService,
  prefix: string,
  options: { listing?: Record<string, unknown> } = {},
): Promise<BenchChatAgent> {
  const identity = TestIdentity.fromSeed('bench chat agent');
  const connections = new HttpAgent({ keepAlive: true, maxSockets: 16 });
  const timings = new Map<string, AgentTiming>();
  const submit = (body: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = request(
        `${service.url}/v2/agents/mailbox/submit`,
        {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          agent: connections,
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => {
            if (res.statusCode === 200) resolve();
            else reject(new Error(`a reply was refused: ${res.statusCode} ${text}`));
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const signed = (to: EnvelopeFields, schema: string, payload: unknown): string =>
    JSON.stringify(
      identity.signEnvelope({
        version: 1,
        sender: identity.address,
        target: to.sender,
        session: to.session,
        schema_digest: schema,
        protocol_digest: CHAT_PROTOCOL_DIGEST,
        payload: Buffer.from(JSON.stringify(payload), 'utf8').toString('base64'),
        expires: Math.floor(Date.now() / 1000) + 60,
        nonce: Math.floor(Math.random() * 2 ** 40),
      }),
    );
  const answer = async (envelope: EnvelopeFields, receivedAt: number): Promise<void> => {
    if (envelope.schema_digest !== CHAT_MESSAGE_DIGEST) return;
    const payload = JSON.parse(Buffer.from(envelope.payload ?? '', 'base64').toString('utf8')) as {
      msg_id: string;
      content: ChatContent[];
    };
    await submit(
      signed(envelope, CHAT_ACKNOWLEDGEMENT_DIGEST, {
        timestamp: new Date().toISOString(),
        acknowledged_msg_id: payload.msg_id,
      }),
    );
    const acknowledgedAt = performance.now();
    const text = payload.content.flatMap((part) => (part.type === 'text' ? [part.text] : []));
    if (text.length === 0) return;
    const replyText = `${prefix}${text.join('')}`;
    const body = signed(envelope, CHAT_MESSAGE_DIGEST, {
      timestamp: new Date().toISOString(),
      msg_id: randomUUID(),
      content: [{ type: 'text', text: replyText }],
    });
    timings.set(replyText, { receivedAt, acknowledgedAt, replyStartedAt: performance.now() });
    await submit(body);
  };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const receivedAt = performance.now();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      answer(JSON.parse(body) as EnvelopeFields, receivedAt).catch((err: unknown) => {
        process.stderr.write(`the bench chat agent failed to answer: ${String(err)}\n`);
      });
    });
  });
  const url = await listenOnLoopback(server);
  await registerAgent(service, service.apiKey, identity, {
    redirectUrl: url,
    listing: options.listing,
  });
  return {
    address: identity.address,
    take: (replyText) => {
      const timing = timings.get(replyText);
      timings.delete(replyText);
      return timing;
    },
    close: async () => {
      connections.destroy();
      await closeNow(server);
    },
  };
}
