import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server as HttpServer } from 'node:http';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { hostOf, registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';

const CAP = 40;
const HEADERS_TIMEOUT_MS = 2000;
const REQUEST_TIMEOUT_MS = 3000;
const KEEP_ALIVE_TIMEOUT_MS = 300;

/** A client connection from another loopback address, and whether the server closed it. */
interface SlowClient {
  socket: Socket;
  closedAt: number | undefined;
  answer: string;
}

describeOnEachDialect('slow and idle clients', (dialect) => {
  let t: TestServer;
  let port: number;

  before(async () => {
    t = await startTestServer({
      dialect,
      config: {
        maxConnectionsPerAddress: CAP,
        headersTimeoutMs: HEADERS_TIMEOUT_MS,
        requestTimeoutMs: REQUEST_TIMEOUT_MS,
        keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
        allowPrivateTargets: true,
        proxySyncTimeoutMs: REQUEST_TIMEOUT_MS + 1000,
      },
    });
    port = Number(new URL(t.url).port);
  });
  after(() => t.close());

  async function open(behaviour: (socket: Socket) => void): Promise<SlowClient> {
    const socket = connect({ port, host: '127.0.0.1', localAddress: '127.0.0.2' });
    const client: SlowClient = { socket, closedAt: undefined, answer: '' };
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => (client.answer += chunk.toString()));
    socket.on('close', () => (client.closedAt = Date.now()));
    await new Promise<void>((resolve) => {
      socket.once('connect', () => resolve());
      socket.once('close', () => resolve());
    });
    if (client.closedAt === undefined) behaviour(socket);
    return client;
  }

  function trickle(socket: Socket, text: string, everyMs: number): void {
    let at = 0;
    const timer = setInterval(() => {
      if (socket.destroyed || at >= text.length) return clearInterval(timer);
      socket.write(text[at++]!);
    }, everyMs);
    socket.once('close', () => clearInterval(timer));
  }

  it('keeps answering /health while one address holds many slow and idle connections', async () => {
    const started = Date.now();
    const clients = await Promise.all(
      Array.from({ length: 150 }, (_, index) =>
        open((socket) => {
          if (index % 3 === 0) return; // silent
          if (index % 3 === 1) {
            socket.write('GET /health HTTP/1.1\r\nHost: x\r\n');
            trickle(socket, 'x-slow: '.padEnd(10_000, 'a'), 50);
          } else {
            socket.write(
              'POST /v2/agents/mailbox/submit HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n',
            );
            trickle(socket, '{'.padEnd(1000, ' '), 50);
          }
        }),
      ),
    );
    // Connections beyond the cap go as soon as the server accepts them, well before any
    // timeout closes the others.
    const stillOpen = () => clients.filter((client) => client.closedAt === undefined).length;
    while (stillOpen() > CAP && Date.now() < started + HEADERS_TIMEOUT_MS - 300) await sleep(20);
    assert.ok(stillOpen() <= CAP, `${stillOpen()} connections from one address stay open`);
    assert.ok(stillOpen() >= CAP / 2, 'the timeouts did not wait');

    const probes: number[] = [];
    for (let i = 0; i < 20; i++) {
      probes.push((await call(t.url, 'GET', '/health')).status);
      await sleep(20);
    }
    assert.deepEqual(new Set(probes), new Set([200]));

    const deadline = started + REQUEST_TIMEOUT_MS + 2500;
    while (clients.some((client) => client.closedAt === undefined) && Date.now() < deadline) {
      await sleep(50);
    }
    const lingering = clients.filter((client) => client.closedAt === undefined);
    assert.equal(lingering.length, 0, `${lingering.length} slow connections were never closed`);
    const slowBodies = clients.filter((client) => client.answer.includes('408'));
    assert.ok(slowBodies.length > 0, 'slow clients are told 408');
  });

  it('closes an idle keep-alive connection after its timeout', async () => {
    const client = await open((socket) => socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n'));
    const sent = Date.now();
    while (client.closedAt === undefined && Date.now() - sent < 4000) await sleep(25);
    assert.match(client.answer, /^HTTP\/1\.1 200/);
    assert.ok(client.closedAt !== undefined, 'the idle connection stays open');
  });

  it('does not cut a response that takes longer than the request timeout to prepare', async () => {
    const silent: HttpServer = createServer(() => {});
    const silentUrl = await listenOnLoopback(silent);
    try {
      const agent = TestIdentity.random();
      await registerAgent(hostOf(t), t.userKey, agent, { redirectUrl: `${silentUrl}/` });
      const sender = TestIdentity.random();
      const envelope = sender.signEnvelope(
        makeEnvelope({ sender: sender.address, target: agent.address, payloadJson: '{}' }),
      );
      const started = Date.now();
      const res = await call(t.url, 'POST', '/v2/agents/proxy/submit', {
        body: envelope,
        headers: { 'x-uagents-connection': 'sync' },
      });
      assert.equal(res.status, 504, res.text);
      assert.ok(Date.now() - started >= REQUEST_TIMEOUT_MS + 950);
    } finally {
      await closeNow(silent);
    }
  });
});
