/**
 * `npx tsx bench/held-memory.ts [POLLS] [sqlite|postgres] [--compare REF] [--heap-snapshots DIR]`:
 * what a held mailbox poll costs in memory, next to what Node's own HTTP server costs for a
 * request it holds. Three servers in turn, each a child process run with `--expose-gc`: a bare
 * node:http server that never answers, a bare Fastify route that waits until its client goes
 * away, and `agentry serve` (built as `npm start` does, over SQLite in a scratch directory or a
 * fresh schema on the benchmark's PostgreSQL server, `AGENTRY_BENCH_PG_URL`; the hold raised to
 * 240 s, no cap on connections per address, each agent allowed its share of the polls) with
 * 1,000 agents whose mailboxes are empty. Each gets POLLS (10,000 unless given) polls of those
 * agents, each on a connection of its own as the uAgents client polls, once 1,000 have been
 * opened and dropped to warm it up. Memory is read after a full garbage collection, before and
 * after, and printed per held poll: the V8 heap in use (live objects), the heap reserved,
 * resident memory, and resident memory outside the heap. `--compare REF` measures REF's
 * `agentry serve` too (built as `npm run bench -- --compare` builds it), after this tree's.
 * `--heap-snapshots DIR` writes each `agentry serve`'s heap to DIR while it holds the polls
 * (after a full collection), for a side-by-side look in the browser's memory tools. Needs
 * `ulimit -n` above POLLS + 1,100.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { connect, createConnection, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { repositoryRoot } from '../test/kit/process.js';
import { freePort } from '../test/kit/ports.js';
import { seededIdentities } from './lib/envelopes.js';
import { openMailboxes, openStore } from './lib/seed.js';
import { buildOfRef } from './lib/builds.js';
import { buildService, startService, type RunningService } from './lib/server.js';
import { freshDatabase } from './lib/databases.js';

const { values: options, positionals } = parseArgs({
  allowPositionals: true,
  options: { compare: { type: 'string' }, 'heap-snapshots': { type: 'string' } },
});
const POLLS = Number(positionals[0] ?? 10_000);
const STORE = positionals[1] === 'postgres' ? 'postgres' : 'sqlite';
const SNAPSHOTS = options['heap-snapshots'];
const AGENTS = 1_000;
const WARM_UP = 1_000;
const BATCH = 500;
const KiB = 1024;

/**
 * Preloaded into each measured server (main thread only): on a Unix socket, `m` answers its
 * memory after two full collections, `c` how many requests it holds (the bare servers count
 * theirs in `globalThis.heldRequests`), `s<path>` writes its heap to the file at path.
 */
const PROBE = `
import { createServer } from 'node:net';
import { writeHeapSnapshot } from 'node:v8';
import { isMainThread } from 'node:worker_threads';
const path = process.env.HELD_MEMORY_PROBE;
if (isMainThread && path) {
  const server = createServer((socket) => socket.once('data', (data) => {
    const what = String(data);
    if (what === 'm') { globalThis.gc(); globalThis.gc(); }
    if (what.startsWith('s')) writeHeapSnapshot(what.slice(1));
    socket.end(JSON.stringify({ ...process.memoryUsage(), held: globalThis.heldRequests ?? 0 }));
  }));
  server.listen(path);
  server.unref();
}`;
const probeArgs = ['--expose-gc', '--import', `data:text/javascript,${encodeURIComponent(PROBE)}`];

const BARE_HTTP = `
globalThis.heldRequests = 0;
require('node:http').createServer((request, response) => {
  globalThis.heldRequests += 1;
  response.on('close', () => (globalThis.heldRequests -= 1));
}).listen(Number(process.env.PORT), '127.0.0.1');`;

const BARE_FASTIFY = `
globalThis.heldRequests = 0;
const app = require('fastify')();
app.get('/v2/agents/:address/mailbox', async (request, reply) => {
  globalThis.heldRequests += 1;
  await new Promise((resolve) => reply.raw.on('close', resolve));
  globalThis.heldRequests -= 1;
  return [];
});
app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });`;

interface Memory {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  held: number;
}

/** A server under measurement. */
interface Subject {
  port: number;
  held(): Promise<number>;
  memory(): Promise<Memory>;
  /** Writes the server's heap to `path` (an agentry server's only). */
  snapshot?(path: string): Promise<void>;
  stop(): Promise<void>;
}

function ask(probePath: string, what: 'm' | 'c' | `s${string}`): Promise<Memory> {
  return new Promise((resolve, reject) => {
    let text = '';
    const socket = createConnection(probePath, () => socket.write(what));
    socket.on('data', (chunk) => (text += String(chunk)));
    socket.on('end', () => resolve(JSON.parse(text) as Memory));
    socket.on('error', reject);
  });
}

function probeOf(name: string): string {
  return join(tmpdir(), `agentry-held-memory-${process.pid}-${name}.sock`);
}

async function bareServer(name: string, source: string): Promise<Subject> {
  const port = await freePort();
  const probe = probeOf(name);
  const child: ChildProcess = spawn(process.execPath, [...probeArgs, '-e', source], {
    cwd: repositoryRoot,
    env: { ...process.env, PORT: String(port), HELD_MEMORY_PROBE: probe },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (let tries = 0; ; tries++) {
    const up = await ask(probe, 'c').then(
      () => true,
      () => false,
    );
    if (up) break;
    if (tries > 200) throw new Error(`${name} did not start`);
    await sleep(50);
  }
  return {
    port,
    held: async () => (await ask(probe, 'c')).held,
    memory: () => ask(probe, 'm'),
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
      rmSync(probe, { force: true });
    },
  };
}

async function agentryServer(root: string): Promise<Subject> {
  const probe = probeOf('agentry');
  process.env.HELD_MEMORY_PROBE = probe;
  const database = await freshDatabase(STORE);
  let service: RunningService;
  try {
    service = await startService(
      database,
      {
        AGENTRY_MAILBOX_HOLD_SECONDS: '240',
        AGENTRY_MAX_CONNECTIONS_PER_ADDRESS: '0',
        // Each agent holds POLLS / AGENTS polls (four unless raised).
        AGENTRY_MAX_HELD_POLLS_PER_AGENT: String(Math.ceil(POLLS / AGENTS)),
      },
      probeArgs,
      root,
    );
  } finally {
    delete process.env.HELD_MEMORY_PROBE;
  }
  const store = openStore(database.url);
  await openMailboxes(
    store,
    agents.map((agent) => agent.address),
  );
  await store.close();
  return {
    port: Number(new URL(service.url).port),
    held: async () => {
      const metrics = await (await fetch(`${service.url}/metrics`)).text();
      return Number(/^agentry_mailbox_held_polls (\S+)$/m.exec(metrics)?.[1]);
    },
    memory: () => ask(probe, 'm'),
    snapshot: async (path) => {
      await ask(probe, `s${path}`);
    },
    stop: async () => {
      await service.stop();
      await database.drop();
      rmSync(probe, { force: true });
    },
  };
}

/** Opens `count` polls, each on its own connection, and waits until the server holds them. */
async function openPolls(subject: Subject, count: number): Promise<Socket[]> {
  const sockets: Socket[] = [];
  const before = await subject.held();
  const waitFor = async (held: number): Promise<void> => {
    const deadline = Date.now() + 120_000;
    while ((await subject.held()) - before < held) {
      if (Date.now() > deadline) throw new Error(`fewer than ${held} polls were held`);
      await sleep(50);
    }
  };
  for (let i = 0; i < count; i++) {
    const { address, authorization } = polls[i % AGENTS]!;
    const socket = connect(subject.port, '127.0.0.1');
    socket.on('error', () => {});
    socket.write(
      `GET /v2/agents/${address}/mailbox HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${authorization}\r\nConnection: close\r\n\r\n`,
    );
    sockets.push(socket);
    // In batches: faster, they would overflow the listen backlog.
    if (i % BATCH === BATCH - 1) await waitFor(sockets.length - BATCH / 5);
  }
  await waitFor(count);
  return sockets;
}

async function dropPolls(subject: Subject, sockets: Socket[]): Promise<void> {
  for (const socket of sockets) socket.destroy();
  while ((await subject.held()) > 0) await sleep(50);
}

async function measure(name: string, start: () => Promise<Subject>): Promise<string> {
  const subject = await start();
  try {
    await dropPolls(subject, await openPolls(subject, WARM_UP));
    const before = await subject.memory();
    const sockets = await openPolls(subject, POLLS);
    await sleep(1000);
    const after = await subject.memory();
    if (SNAPSHOTS && subject.snapshot) {
      const file = join(SNAPSHOTS, `${name.replace(/[^\w.-]+/g, '-')}.heapsnapshot`);
      await subject.snapshot(file);
      process.stderr.write(`${name}: heap written to ${file}\n`);
    }
    await dropPolls(subject, sockets);
    const per = (field: keyof Memory): number => (after[field] - before[field]) / POLLS / KiB;
    const cells = [
      per('heapUsed'),
      per('heapTotal'),
      per('rss'),
      per('rss') - per('heapTotal'),
    ].map((kib) => kib.toFixed(2).padStart(12));
    return `${name.padEnd(28)}${cells.join('')}`;
  } finally {
    await subject.stop();
  }
}

const agents = seededIdentities('bench held memory agent', AGENTS);
const now = Math.floor(Date.now() / 1000);
const polls = agents.map((agent) => ({
  address: agent.address,
  authorization: `Agent ${agent.attestation({ validFrom: now - 60, validTo: now + 3000 })}`,
}));

await buildService();
const compared = options.compare
  ? await buildOfRef(options.compare, (line) => process.stderr.write(`${line}\n`))
  : undefined;
if (SNAPSHOTS) mkdirSync(SNAPSHOTS, { recursive: true });
const rows = [
  `${POLLS.toLocaleString('en-US')} held polls, KiB per poll, after a full collection:`,
  `${''.padEnd(28)}${['heap used', 'heap total', 'RSS', 'RSS - heap'].map((h) => h.padStart(12)).join('')}`,
];
rows.push(await measure('node:http, never answering', () => bareServer('http', BARE_HTTP)));
rows.push(await measure('Fastify route, waiting', () => bareServer('fastify', BARE_FASTIFY)));
rows.push(await measure(`agentry serve, ${STORE}`, () => agentryServer(repositoryRoot)));
if (compared) {
  rows.push(
    await measure(`agentry serve ${compared.label}, ${STORE}`, () => agentryServer(compared.root)),
  );
}
process.stdout.write(`${rows.join('\n')}\n`);
