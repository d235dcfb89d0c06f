import { randomUUID } from 'node:crypto';
import { createServer, type Server as HttpServer } from 'node:http';
import type { EnvelopeFields } from '../../src/crypto/index.js';
import {
  CHAT_ACKNOWLEDGEMENT_DIGEST,
  CHAT_MESSAGE_DIGEST,
  CHAT_PROTOCOL_DIGEST,
  type ChatContent,
} from '../../src/wire/chat.js';
import { registerAgent, type AgentHost } from './agents.js';
import { closeNow, listenOnLoopback } from './loopback.js';
import { TestIdentity } from './uagent.js';

/** How the scripted agent answers a chat message's text. */
export type ChatAnswer =
  /** One message: the text given back, prefixed. */
  | { kind: 'echo'; prefix: string; delayMs?: number }
  /** A streamed reply: start-stream, one message per chunk, end-stream. */
  | { kind: 'stream'; chunks: string[] }
  /** Nothing at all (not even an acknowledgement). */
  | { kind: 'silent' };

/** A chat message the scripted agent received, with its envelope. */
export interface HeardChat {
  envelope: EnvelopeFields;
  payload: { msg_id?: string; acknowledged_msg_id?: string; content?: ChatContent[] };
}

/**
 * An agent that speaks the chat protocol as a uAgents chat agent does, scripted: registered
 * here as a proxy agent whose URL is its own loopback server, it acknowledges each chat message
 * and answers it as `answer` says, sending to the sender through the service's mailbox
 * endpoint (where the sender's Almanac record points).
 */
export async function startChatAgent(
  host: AgentHost,
  ownerKey: string,
  answer: ChatAnswer = { kind: 'echo', prefix: 'echo: ' },
  /** Fields of its listing besides address, url and agent_type (its protocols, name…). */
  listing?: Record<string, unknown>,
): Promise<{
  address: string;
  identity: TestIdentity;
  heard: HeardChat[];
  close(): Promise<void>;
}> {
  const identity = TestIdentity.random();
  const heard: HeardChat[] = [];
  const send = async (to: EnvelopeFields, schema: string, payload: unknown): Promise<void> => {
    const envelope = identity.signEnvelope({
      version: 1,
      sender: identity.address,
      target: to.sender,
      session: to.session,
      schema_digest: schema,
      protocol_digest: CHAT_PROTOCOL_DIGEST,
      payload: Buffer.from(JSON.stringify(payload), 'utf8').toString('base64'),
      expires: Math.floor(Date.now() / 1000) + 60,
      nonce: Math.floor(Math.random() * 2 ** 40),
    });
    const response = await fetch(`${host.url}/v2/agents/mailbox/submit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(envelope),
    });
    if (!response.ok) throw new Error(`reply refused: ${response.status} ${await response.text()}`);
  };
  const message = (content: ChatContent[]) => ({
    timestamp: new Date().toISOString(),
    msg_id: randomUUID(),
    content,
  });
  const answerTo = async (envelope: EnvelopeFields, payload: HeardChat['payload']) => {
    if (envelope.schema_digest !== CHAT_MESSAGE_DIGEST || answer.kind === 'silent') return;
    // As uAgents serialises a ChatAcknowledgement without metadata.
    await send(envelope, CHAT_ACKNOWLEDGEMENT_DIGEST, {
      timestamp: new Date().toISOString(),
      acknowledged_msg_id: payload.msg_id,
      metadata: null,
    });
    const text = (payload.content ?? [])
      .flatMap((part) => (part.type === 'text' ? [part.text] : []))
      .join('');
    if (text === '') return;
    if (answer.kind === 'echo') {
      if (answer.delayMs) await new Promise((resolve) => setTimeout(resolve, answer.delayMs));
      await send(
        envelope,
        CHAT_MESSAGE_DIGEST,
        message([{ type: 'text', text: `${answer.prefix}${text}` }]),
      );
      return;
    }
    const streamId = randomUUID();
    await send(
      envelope,
      CHAT_MESSAGE_DIGEST,
      message([{ type: 'start-stream', stream_id: streamId }]),
    );
    for (const chunk of answer.chunks) {
      await send(envelope, CHAT_MESSAGE_DIGEST, message([{ type: 'text', text: chunk }]));
    }
    await send(
      envelope,
      CHAT_MESSAGE_DIGEST,
      message([{ type: 'end-stream', stream_id: streamId }]),
    );
  };
  const server: HttpServer = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      const envelope = JSON.parse(body) as EnvelopeFields;
      const payload = JSON.parse(
        Buffer.from(envelope.payload ?? '', 'base64').toString('utf8'),
      ) as HeardChat['payload'];
      heard.push({ envelope, payload });
      void answerTo(envelope, payload).catch(() => {});
    });
  });
  const url = await listenOnLoopback(server);
  await registerAgent(host, ownerKey, identity, { redirectUrl: url, ...(listing && { listing }) });
  return { address: identity.address, identity, heard, close: () => closeNow(server) };
}
