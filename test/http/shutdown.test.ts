import { it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { hostOf, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { startTestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';

/** Whether a new TCP connection to the port is still accepted. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describeOnEachDialect('shutdown', (dialect) => {
  it('answers a request arriving while the server closes with 503 and detail, then closes the connection', async () => {
    const t = await startTestServer({ dialect, config: { allowPrivateTargets: true } });
    // The agent's endpoint holds the forwarded message until told to answer: the proxied
    // request in flight keeps the server closing, not closed.
    let held: ServerResponse | undefined;
    let reached!: () => void;
    const forwarded = new Promise<void>((resolve) => (reached = resolve));
    const upstream = createServer((_req: IncomingMessage, res: ServerResponse) => {
      held = res;
      reached();
    });
    const upstreamUrl = await listenOnLoopback(upstream);
    try {
      const agent = TestIdentity.random();
      await registerAgent(hostOf(t), t.userKey, agent, { redirectUrl: `${upstreamUrl}/` });
      const sender = TestIdentity.random();
      const envelope = JSON.stringify(
        sender.signEnvelope(
          makeEnvelope({ sender: sender.address, target: agent.address, payloadJson: '{}' }),
        ),
      );

      const port = Number(new URL(t.url).port);
      const socket = connect({ port, host: '127.0.0.1' });
      let answer = '';
      let closed = false;
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
      socket.on('close', () => (closed = true));
      socket.on('error', () => {});
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      socket.write(
        `POST /v2/agents/proxy/submit HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nx-uagents-connection: sync\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(envelope)}\r\n\r\n${envelope}`,
      );
      await forwarded;

      const closing = t.server.close();
      // The listening socket closes once close() has begun turning requests away.
      while (await accepts(port)) await sleep(10);
      // A new request on the kept-alive connection, behind the one in flight; the one in flight
      // is answered once the new one has reached the server.
      const arrived = new Promise<void>((resolve) =>
        t.server.app.server.prependListener('request', (req: IncomingMessage) => {
          if (req.url === '/v1/almanac/recent') resolve();
        }),
      );
      socket.write('GET /v1/almanac/recent HTTP/1.1\r\nHost: x\r\n\r\n');
      await arrived;
      held!.writeHead(200, { 'content-type': 'application/json' }).end('{}');

      const deadline = Date.now() + 5000;
      while (!closed && Date.now() < deadline) await sleep(10);
      assert.ok(closed, `the connection stays open after: ${answer}`);
      await closing;

      const responses = answer.split(/(?=HTTP\/1\.1 )/);
      assert.equal(responses.length, 2, answer);
      assert.match(responses[0]!, /^HTTP\/1\.1 200 /);
      const [head, body] = responses[1]!.split('\r\n\r\n');
      assert.match(head!, /^HTTP\/1\.1 503 /);
      assert.match(head!, /\r\nconnection: close\r\n/i);
      assert.match(head!, /\r\ncontent-type: application\/json/i);
      assert.match(head!, /\r\nx-request-id: /i);
      assert.deepEqual(JSON.parse(body!), {
        detail: 'Service Unavailable: the server is shutting down',
      });
    } finally {
      await closeNow(upstream);
      await t.close();
    }
  });
});
