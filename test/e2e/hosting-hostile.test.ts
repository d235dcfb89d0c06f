import assert from 'node:assert/strict';
import { chmodSync, existsSync } from 'node:fs';
import { createServer, type Server as NetServer } from 'node:net';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { HostingRunner } from '../../src/runner/runner.js';
import { sqlitePath } from '../../src/store/database.js';
import {
  hostingConfig,
  hostingDir,
  hostingSkipReason,
  Owner,
  sleep,
  startRunner,
} from '../kit/hosted-agents.js';
import { startTestServer, type TestServer } from '../kit/server.js';

/**
 * Hostile agents in the bubblewrap sandbox, deployed through the Hosting API: each tries one
 * thing an agent must not do, and the test checks that it is contained, that its owner is told
 * why (its state_reason and its log), and that the server and a well-behaved neighbour go on
 * working throughout.
 */

const skip = hostingSkipReason('bwrap');

const LIMITS = { memoryMb: 256, processes: 32, diskMb: 4, logLines: 200, logLinesPerSecond: 50 };

describe('hosted agents: hostile agents in the sandbox', { skip }, () => {
  let server: TestServer;
  let runner: HostingRunner;
  let owner: Owner;
  let neighbour: string;
  let elsewhere: NetServer;
  let elsewherePort: number;
  const hosted = hostingDir();

  before(async () => {
    server = await startTestServer({
      config: {
        hosting: hostingConfig({ dir: hosted.dir, sandbox: 'bwrap', egress: 'agentry', ...LIMITS }),
      },
    });
    runner = await startRunner(server, { crashLoopCount: 50 });
    owner = new Owner(server);
    // A service on this machine that is not Agentry: agents must not reach it.
    elsewhere = createServer((socket) => socket.end('you reached me\n'));
    await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
    elsewherePort = (elsewhere.address() as { port: number }).port;
    // It prints a line every 100 ms and asks Agentry for /health every half second.
    neighbour = await owner.deploy('neighbour', {
      'agent.py': [
        'import os, time, urllib.request',
        'n = 0',
        'while True:',
        '    n += 1',
        '    if n % 5 == 0:',
        '        status = urllib.request.urlopen(os.environ["AGENTRY_URL"] + "/health", timeout=5).status',
        '        print("neighbour health", status, flush=True)',
        '    print("neighbour", n, flush=True)',
        '    time.sleep(0.1)',
      ].join('\n'),
    });
    await owner.waitForLog(neighbour, /^neighbour health 200$/);
  });

  after(async () => {
    await runner?.stop();
    await server?.close();
    // A before that failed early made no such server: nothing to close, nothing to wait for.
    if (elsewhere) await new Promise((resolve) => elsewhere.close(resolve));
    hosted.remove();
  });

  /** The neighbour is still running, unharmed, and still writing and reaching Agentry. */
  async function neighbourIsWell(): Promise<void> {
    const agent = await owner.agent(neighbour);
    assert.equal(agent.state, 'running');
    assert.equal(agent.restarts, 0);
    const last = (await owner.logs(neighbour)).filter((l) => /^neighbour \d+$/.test(l.log_entry));
    const latest = Number(last.at(-1)?.log_entry.split(' ')[1]);
    await owner.waitForLog(neighbour, new RegExp(`^neighbour ${latest + 5}$`), 5000);
    const health = await fetch(`${server.url}/health`, { signal: AbortSignal.timeout(2000) });
    assert.equal(health.status, 200);
  }

  /** Deploys a hostile agent and waits for it to be stopped; answers its state. */
  async function contained(name: string, program: string[]) {
    const address = await owner.deploy(name, { 'agent.py': program.join('\n') });
    const agent = await owner.waitForAgent(
      address,
      (a) => a.state === 'crashed' || a.state === 'failed',
    );
    await owner.stop(address);
    return { address, agent, logs: (await owner.logs(address)).map((l) => l.log_entry) };
  }

  it('asks a sandboxed agent to stop (SIGTERM) and lets it finish before the grace ends', async () => {
    const address = await owner.deploy('polite', {
      'agent.py': [
        'import signal, sys, time',
        'def bye(*_):',
        '    time.sleep(0.5)  # cleaning up',
        '    print("asked to stop", flush=True)',
        '    sys.exit(0)',
        'signal.signal(signal.SIGTERM, bye)',
        'print("up", flush=True)',
        'while True: time.sleep(1)',
      ].join('\n'),
    });
    await owner.waitForLog(address, /^up$/);
    await owner.stop(address);
    await owner.waitForAgent(address, (a) => a.state === 'stopped');
    await owner.waitForLog(address, /^asked to stop$/, 2000);
  });

  it("cannot read the database, the hosting key or Agentry's files", async () => {
    const database = sqlitePath(server.config.databaseUrl);
    const key = `${database}.hosting-key`;
    assert.ok(existsSync(key), 'the hosting key file exists beside the database');
    // Readable by anyone on the machine: only the sandbox keeps them from the agent.
    chmodSync(dirname(database), 0o755);
    chmodSync(database, 0o644);
    const targets = [database, key, join(process.cwd(), 'package.json'), '/etc/passwd'];
    const address = await owner.deploy('reader', {
      'agent.py': [
        'import os, time',
        `for path in ${JSON.stringify(targets)}:`,
        '    try:',
        '        print("READ", path, len(open(path, "rb").read()), flush=True)',
        '    except Exception as err:',
        '        print("DENIED", path, type(err).__name__, flush=True)',
        `print("LISTED", sorted(os.listdir("/")), flush=True)`,
        'print("ENV", sorted(os.environ), flush=True)',
        'while True: time.sleep(1)',
      ].join('\n'),
    });
    const listed = await owner.waitForLog(address, /^LISTED /);
    const entries = (await owner.logs(address)).map((l) => l.log_entry);
    assert.deepEqual(
      entries.filter((e) => e.startsWith('READ')),
      [],
      `nothing read: ${entries.join('\n')}`,
    );
    for (const target of targets) {
      assert.ok(
        entries.some((e) => e.startsWith(`DENIED ${target} `)),
        target,
      );
    }
    assert.doesNotMatch(listed.log_entry, /'(root|home|work|var|srv|opt)'/);
    const env = entries.find((e) => e.startsWith('ENV '))!;
    assert.doesNotMatch(env, /'AGENTRY_(DATABASE|HOSTING)/, 'none of the server environment');
    await owner.stop(address);
    await neighbourIsWell();
  });

  it('cannot write outside its own directory', async () => {
    const neighbourHome = join(hosted.dir, neighbour, 'home');
    const targets = [
      '/usr/pwned',
      '/etc/pwned',
      '/pwned',
      '/dev/pwned',
      join(neighbourHome, 'pwned'),
    ];
    const address = await owner.deploy('writer', {
      'agent.py': [
        'import time',
        `for path in ${JSON.stringify(targets)}:`,
        '    try:',
        '        open(path, "w").write("x")',
        '        print("WROTE", path, flush=True)',
        '    except Exception as err:',
        '        print("DENIED", path, type(err).__name__, flush=True)',
        'open("mine.txt", "w").write("fine")',
        'print("OWN", open("mine.txt").read(), flush=True)',
        'while True: time.sleep(1)',
      ].join('\n'),
    });
    await owner.waitForLog(address, /^OWN fine$/);
    const entries = (await owner.logs(address)).map((l) => l.log_entry);
    assert.deepEqual(
      entries.filter((e) => e.startsWith('WROTE')),
      [],
    );
    for (const target of targets) assert.ok(existsSync(target) === false, target);
    await owner.stop(address);
    await neighbourIsWell();
  });

  it('a fork bomb is held to the process limit and stopped', async () => {
    const { agent, logs } = await contained('forker', [
      'import os, time',
      'print("forking", flush=True)',
      'while True:',
      '    try:',
      '        os.fork()',
      '    except OSError:',
      '        time.sleep(0.01)',
    ]);
    assert.match(agent.stateReason ?? '', /^too many processes \(the limit is 32\)/);
    assert.ok(logs.includes('stopped: too many processes (the limit is 32)'));
    await neighbourIsWell();
  });

  it('unbounded allocation ends on the memory limit', async () => {
    const { agent, logs } = await contained('allocator', [
      'hoard = []',
      'print("allocating", flush=True)',
      'while True:',
      '    hoard.append(bytearray(10_000_000))',
    ]);
    assert.match(agent.stateReason ?? '', /^memory limit/);
    // The traceback is one entry, ending with the exception.
    assert.ok(
      logs.some((entry) => /(^|\n)MemoryError$/.test(entry)),
      logs.join('\n'),
    );
    await neighbourIsWell();
  });

  it('filling the disk is stopped at the disk limit', async () => {
    const { agent, logs } = await contained('filler', [
      'import time',
      'i = 0',
      'while True:',
      '    open(f"junk{i}", "wb").write(b"x" * 500_000)',
      '    i += 1',
      '    time.sleep(0.02)',
    ]);
    assert.match(agent.stateReason ?? '', /^disk limit/);
    assert.ok(logs.some((line) => line.startsWith('stopped: disk limit')));
    await neighbourIsWell();
  });

  it('a stdout flood is bounded, and the server and the neighbour are unaffected', async () => {
    const address = await owner.deploy('flooder', {
      'agent.py': 'i = 0\nwhile True:\n    print("flood", i, "x" * 200)\n    i += 1\n',
    });
    await owner.waitForLog(address, /lines dropped: more than 50 lines a second$/);
    // While it floods, the server answers at once.
    for (let i = 0; i < 5; i++) {
      const start = performance.now();
      const health = await fetch(`${server.url}/health`);
      assert.equal(health.status, 200);
      assert.ok(performance.now() - start < 500, 'answered within half a second');
      await sleep(200);
    }
    await sleep(2000);
    const logs = await owner.logs(address);
    assert.ok(logs.length <= LIMITS.logLines, `${logs.length} lines kept`);
    const flood = logs.filter((l) => l.log_entry.startsWith('flood '));
    const seconds =
      (Date.parse(flood.at(-1)!.log_timestamp) - Date.parse(flood[0]!.log_timestamp)) / 1000;
    assert.ok(
      flood.length <= (seconds + 1) * LIMITS.logLinesPerSecond,
      `${flood.length} lines in ${seconds} s`,
    );
    assert.equal((await owner.agent(address)).state, 'running', 'held back, not stopped');
    await neighbourIsWell();
    await owner.stop(address);
  });

  it('reaches this Agentry and nothing else', async () => {
    const address = await owner.deploy('egress', {
      'agent.py': [
        'import os, socket, time, urllib.request',
        'url = os.environ["AGENTRY_URL"]',
        'print("AGENTRY", urllib.request.urlopen(url + "/health", timeout=5).status, flush=True)',
        `for host, port in [("127.0.0.1", ${elsewherePort}), ("1.1.1.1", 80), ("example.com", 80)]:`,
        '    try:',
        '        socket.create_connection((host, port), timeout=3).recv(100)',
        '        print("REACHED", host, flush=True)',
        '    except Exception as err:',
        '        print("BLOCKED", host, type(err).__name__, flush=True)',
        'print("DONE", flush=True)',
        'while True: time.sleep(1)',
      ].join('\n'),
    });
    await owner.waitForLog(address, /^DONE$/, 20_000);
    const entries = (await owner.logs(address)).map((l) => l.log_entry);
    assert.ok(entries.includes('AGENTRY 200'), entries.join('\n'));
    assert.deepEqual(
      entries.filter((e) => e.startsWith('REACHED')),
      [],
    );
    for (const host of ['127.0.0.1', '1.1.1.1', 'example.com']) {
      assert.ok(
        entries.some((e) => e.startsWith(`BLOCKED ${host} `)),
        host,
      );
    }
    await owner.stop(address);
    await neighbourIsWell();
  });
});

describe('hosted agents: egress "any" in the sandbox', { skip }, () => {
  it('lets an agent reach other hosts as well as this Agentry', async () => {
    const hosted = hostingDir();
    const server = await startTestServer({
      config: { hosting: hostingConfig({ dir: hosted.dir, sandbox: 'bwrap', egress: 'any' }) },
    });
    const runner = await startRunner(server);
    const elsewhere = createServer((socket) => socket.end('you reached me\n'));
    await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
    const port = (elsewhere.address() as { port: number }).port;
    try {
      const owner = new Owner(server);
      const address = await owner.deploy('open', {
        'agent.py': [
          'import os, socket, time, urllib.request',
          'print("AGENTRY", urllib.request.urlopen(os.environ["AGENTRY_URL"] + "/health", timeout=5).status, flush=True)',
          `print("ELSEWHERE", socket.create_connection(("127.0.0.1", ${port}), timeout=3).recv(100), flush=True)`,
          'print("BRIDGE", os.environ.get("AGENTRY_BRIDGE_PORT"), flush=True)',
          'while True: time.sleep(1)',
        ].join('\n'),
      });
      await owner.waitForLog(address, /^BRIDGE /);
      const entries = (await owner.logs(address)).map((l) => l.log_entry);
      assert.ok(entries.includes('AGENTRY 200'), entries.join('\n'));
      assert.ok(entries.includes("ELSEWHERE b'you reached me\\n'"), entries.join('\n'));
      assert.ok(entries.includes('BRIDGE None'), 'no bridge: the machine’s network is shared');
    } finally {
      await runner.stop();
      await server.close();
      await new Promise((resolve) => elsewhere.close(resolve));
      hosted.remove();
    }
  });
});
