/**
 * `npx tsx bench/slow-clients.ts [CONNECTIONS]`: starts `agentry serve` (default settings,
 * SQLite in a scratch directory) limited to 1,024 open files, opens CONNECTIONS (default
 * 1,500) connections from 127.0.0.2 that send nothing or a body a byte every 2 s, then probes
 * `/health` 41 times from 127.0.0.1, each on a new connection with a 2 s timeout, and prints
 * how many probes were answered and how many of the slow connections the server kept.
 * Needs Linux (a second loopback address) and `prlimit` (util-linux).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawnServer } from '../test/kit/process.js';

const connections = Number(process.argv[2] ?? 1500);
const PROBES = 41;

function probe(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const request = http.get(
      { host: '127.0.0.1', port, path: '/health', agent: false, timeout: 2000 },
      (response) => {
        response.resume();
        resolve(response.statusCode === 200);
      },
    );
    request.on('timeout', () => {
      request.destroy();
      resolve(false);
    });
    request.on('error', () => resolve(false));
  });
}

const dir = mkdtempSync(join(tmpdir(), 'agentry-slow-clients-'));
const server = await spawnServer(['--data-dir', dir]);
try {
  execFileSync('prlimit', ['--pid', String(server.child.pid), '--nofile=1024:1024']);
  const port = Number(new URL(server.url).port);
  const sockets: Socket[] = [];
  for (let i = 0; i < connections; i++) {
    const socket = connect({ port, host: '127.0.0.1', localAddress: '127.0.0.2' });
    socket.on('error', () => {});
    if (i % 2 === 1) {
      socket.on('connect', () => {
        socket.write(
          'POST /v2/agents/mailbox/submit HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{',
        );
        const timer = setInterval(() => socket.write(' '), 2000);
        socket.on('close', () => clearInterval(timer));
      });
    }
    sockets.push(socket);
    if (i % 100 === 99) await sleep(50);
  }
  await sleep(1000);
  let answered = 0;
  for (let i = 0; i < PROBES; i++) {
    if (await probe(port)) answered++;
    await sleep(500);
  }
  const kept = sockets.filter((socket) => !socket.destroyed && socket.readyState === 'open');
  console.log(
    JSON.stringify({ connections, probes: PROBES, answered, slowConnectionsKept: kept.length }),
  );
  for (const socket of sockets) socket.destroy();
} finally {
  await server.child.stop();
  rmSync(dir, { recursive: true, force: true });
}
