import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createHostingRunner } from '../../src/context.js';
import type { HostingRunner } from '../../src/runner/runner.js';
import {
  alive,
  FAST_RUNNER,
  hostingConfig,
  hostingDir,
  hostingSkipReason,
  Owner,
  sleep,
  startRunner,
} from '../kit/hosted-agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';

/**
 * The runner with real processes: small Python programs (no uagents needed: the bootstrap runs
 * agent.py without a predefined agent then) deployed through the Hosting API as their owner
 * deploys them, run by a runner over the server's database, their state and logs read back
 * through the API.
 */

const skip = hostingSkipReason('off');

describe('hosted agents', { skip }, () => {
  describeOnEachDialect('the runner', (dialect) => {
    let server: TestServer;
    let runner: HostingRunner;
    let owner: Owner;
    const hosted = hostingDir();

    before(async () => {
      server = await startTestServer({
        dialect,
        config: {
          hosting: hostingConfig({
            // PostgreSQL keeps no key file: the key is a setting there.
            key: 'ab'.repeat(32),
            dir: hosted.dir,
            sandbox: 'off',
            logLines: 500,
            allowRequirements: true,
          }),
        },
      });
      runner = await startRunner(server, { crashLoopCount: 4 });
      owner = new Owner(server);
    });

    after(async () => {
      await runner?.stop();
      await server?.close();
      hosted.remove();
    });

    it('runs an agent: what it prints is its log, with times and levels, and stopping it ends its process', async () => {
      const address = await owner.deploy(
        'printer',
        {
          'agent.py': [
            'import os, sys, time',
            'from helper import greeting',
            'open("pid", "w").write(str(os.getpid()))',
            'print(greeting(), os.environ["GREETING_SECRET"], flush=True)',
            'print("to stderr", file=sys.stderr, flush=True)',
            'n = 0',
            'while True:',
            '    n += 1',
            '    print("tick", n, flush=True)',
            '    time.sleep(0.2)',
          ].join('\n'),
          'helper.py': 'def greeting():\n    return "hello from a hosted agent"\n',
        },
        { GREETING_SECRET: 'and its secret' },
      );
      const started = Date.now();
      await owner.waitForAgent(address, (a) => a.state === 'running');
      await owner.waitForLog(address, /^tick 3$/);
      const logs = await owner.logs(address);
      const hello = logs.find((l) => l.log_entry === 'hello from a hosted agent and its secret');
      assert.ok(hello, 'the first line, with a file beside agent.py imported and a secret read');
      assert.equal(hello.log_level, 'info');
      assert.equal(hello.log_type, 'execution');
      const time = Date.parse(hello.log_timestamp);
      assert.ok(time >= started - 1000 && time <= Date.now(), 'stamped when it was printed');
      const stderr = logs.find((l) => l.log_entry === 'to stderr');
      assert.equal(stderr?.log_level, 'erro');
      assert.ok(
        logs.some((l) => l.log_type === 'system' && /uagents cannot be imported/.test(l.log_entry)),
        'the log says agent.py runs without a predefined agent',
      );
      assert.ok(
        logs.some((l) => l.log_type === 'system' && /^limits: sandbox off/.test(l.log_entry)),
      );

      const pid = Number(readFileSync(join(hosted.dir, address, 'home', 'pid'), 'utf8'));
      assert.ok(alive(pid));
      await owner.stop(address);
      const stopped = await owner.waitForAgent(address, (a) => a.state === 'stopped');
      assert.equal(stopped.stateReason, 'Stopped by its owner');
      assert.equal(alive(pid), false, 'its process is gone');
      assert.deepEqual(runner.running, [], 'the runner let it go');
    });

    it('restarts a crashing agent after a growing wait, and a crash loop ends failed with the reason', async () => {
      const address = await owner.deploy('crasher', {
        'agent.py': 'import time\nprint("started", time.time(), flush=True)\nraise SystemExit(3)\n',
      });
      const crashed = await owner.waitForAgent(address, (a) => a.state === 'crashed');
      assert.match(crashed.stateReason ?? '', /^exited with code 3; restarting in \d+ ms$/);
      const failed = await owner.waitForAgent(address, (a) => a.state === 'failed');
      assert.match(
        failed.stateReason ?? '',
        /^crash loop: 4 crashes within 120 s, the last: exited with code 3/,
      );
      assert.equal(failed.restarts, 3);
      const starts = (await owner.logs(address))
        .filter((l) => l.log_entry.startsWith('started '))
        .map((l) => Number(l.log_entry.split(' ')[1]) * 1000);
      assert.equal(starts.length, 4, 'started four times, then no more');
      const waits = starts.slice(1).map((t, i) => t - starts[i]!);
      // 200 ms, 400 ms, 800 ms (and the time each start takes).
      assert.ok(waits[0]! >= 180 && waits[1]! >= 380 && waits[2]! >= 780, `waits: ${waits}`);
      assert.ok(waits[2]! > waits[0]!, `the wait grows: ${waits}`);
      await sleep(1500);
      const later = (await owner.logs(address)).filter((l) => l.log_entry.startsWith('started '));
      assert.equal(later.length, 4, 'a failed agent is not restarted');

      // Started again by its owner, it runs again (and fails again, the same way).
      await owner.start(address);
      await owner.waitForLog(address, /^started /, 5000);
      await owner.waitForAgent(
        address,
        (a) => a.state === 'crashed' || (a.state === 'failed' && a.restarts < 3),
      );
      await owner.stop(address);
    });

    it('restarts an agent whose program ends by itself: an agent runs until it is stopped', async () => {
      const address = await owner.deploy('finisher', { 'agent.py': 'print("done", flush=True)\n' });
      const crashed = await owner.waitForAgent(address, (a) => a.state === 'crashed');
      assert.match(crashed.stateReason ?? '', /^exited with code 0 \(its program ended; /);
      await owner.waitForAgent(address, (a) => a.restarts >= 1);
      await owner.stop(address);
      await owner.waitForAgent(address, (a) => a.state === 'stopped');
    });

    it('stops a deleted agent and removes its private directory', async () => {
      const address = await owner.deploy('doomed', {
        'agent.py':
          'import os, time\nopen("pid", "w").write(str(os.getpid()))\nprint("up", flush=True)\nwhile True: time.sleep(1)\n',
      });
      await owner.waitForLog(address, /^up$/);
      const home = join(hosted.dir, address, 'home');
      const pid = Number(readFileSync(join(home, 'pid'), 'utf8'));
      const deleted = await call(server.url, 'DELETE', `/v1/hosting/agents/${address}`, {
        key: server.userKey,
      });
      assert.ok(deleted.status < 300, deleted.text);
      const until = Date.now() + 10_000;
      while ((alive(pid) || existsSync(join(hosted.dir, address))) && Date.now() < until) {
        await sleep(100);
      }
      assert.equal(alive(pid), false, 'its process is gone');
      assert.equal(existsSync(join(hosted.dir, address)), false, 'its directory is gone');
    });

    it('says the code failed to load, and does not restart it, when agent.py does not compile', async () => {
      const address = await owner.deploy('broken', { 'agent.py': 'def oops(:\n    pass\n' });
      const failed = await owner.waitForAgent(address, (a) => a.state === 'failed');
      assert.match(failed.stateReason ?? '', /^code failed to load: SyntaxError: /);
      assert.equal(failed.restarts, 0);
      const logs = await owner.logs(address);
      assert.ok(logs.some((l) => l.log_level === 'erro' && /SyntaxError/.test(l.log_entry)));
      await owner.stop(address);
    });

    it("answers the agent's storage requests on fd 3 from its storage", async () => {
      const address = await owner.deploy('storer', {
        'agent.py': [
          'import json, os, socket, time',
          'channel = socket.socket(fileno=3)',
          'lines = channel.makefile("rwb")',
          'def ask(**request):',
          '    lines.write(json.dumps(request).encode() + b"\\n"); lines.flush()',
          '    return json.loads(lines.readline())',
          'print("set", ask(id=1, op="set", key="count", value={"n": 41}), flush=True)',
          'print("get", ask(id=2, op="get", key="count"), flush=True)',
          'print("has", ask(id=3, op="has", key="missing"), flush=True)',
          'print("keys", ask(id=4, op="keys"), flush=True)',
          'print("bad", ask(id=5, op="set", key="x" * 600, value=1), flush=True)',
          'print("huge", ask(id=6, op="set", key="huge", value="x" * 5_000_000), flush=True)',
          'print("after", ask(id=7, op="get", key="count"), flush=True)',
          'while True: time.sleep(1)',
        ].join('\n'),
      });
      await owner.waitForLog(address, /^after /);
      const entries = (await owner.logs(address)).map((l) => l.log_entry);
      assert.ok(entries.includes("set {'id': 1, 'ok': True, 'value': None}"), entries.join('\n'));
      assert.ok(entries.includes("get {'id': 2, 'ok': True, 'value': {'n': 41}}"));
      assert.ok(entries.includes("has {'id': 3, 'ok': True, 'value': False}"));
      assert.ok(entries.includes("keys {'id': 4, 'ok': True, 'value': ['count']}"));
      assert.ok(entries.some((e) => e.startsWith("bad {'id': 5, 'ok': False, 'error': ")));
      assert.ok(
        entries.includes(
          "huge {'id': 6, 'ok': False, 'error': 'a storage request is at most 4194304 bytes'}",
        ),
        'a request too long to read is refused by its id',
      );
      assert.ok(
        entries.includes("after {'id': 7, 'ok': True, 'value': {'n': 41}}"),
        'and the channel goes on',
      );
      assert.equal(
        await owner.storage(address, 'count'),
        '{"n":41}',
        'kept as JSON in its storage',
      );
      await owner.stop(address);
    });

    it('installs requirements.txt before it starts, and fails with the reason when pip cannot', async () => {
      const address = await owner.deploy('needy', {
        'agent.py': 'print("started without its requirements", flush=True)\n',
        'requirements.txt': 'this is not a requirement!\n',
      });
      const failed = await owner.waitForAgent(address, (a) => a.state === 'failed', 60_000);
      assert.equal(
        failed.stateReason,
        'requirements.txt could not be installed (pip exited with code 1); see the logs',
      );
      const logs = await owner.logs(address);
      assert.ok(
        logs.some((l) => l.log_type === 'system' && l.log_entry === 'installing requirements.txt'),
      );
      assert.ok(
        logs.some((l) => l.log_level === 'erro' && /Invalid requirement/.test(l.log_entry)),
      );
      assert.ok(!logs.some((l) => l.log_entry === 'started without its requirements'));
      await owner.stop(address);
    });

    it('shares agents among runners through their claims, and another takes over those of a runner that stops', async () => {
      // The suite's runner takes no more for now: these runners share the new agents.
      await runner.stop();
      const first = await startRunner(server, { maxAgents: 2 });
      const second = await startRunner(server, { maxAgents: 2 });
      let third: HostingRunner | undefined;
      try {
        const program = 'import time\nprint("up", flush=True)\nwhile True: time.sleep(1)\n';
        const addresses: string[] = [];
        for (let i = 0; i < 4; i++) {
          addresses.push(await owner.deploy(`shared-${i}`, { 'agent.py': program }));
        }
        for (const address of addresses) {
          await owner.waitForAgent(address, (a) => a.state === 'running');
        }
        assert.equal(first.running.length, 2);
        assert.equal(second.running.length, 2);
        assert.deepEqual([...first.running, ...second.running].sort(), [...addresses].sort());

        const moved = second.running;
        await second.stop();
        for (const address of moved) {
          const agent = await owner.agent(address);
          assert.equal(agent.state, 'stopped');
          assert.match(agent.stateReason ?? '', /^Its runner stopped/);
        }
        third = await startRunner(server, { maxAgents: 2 });
        for (const address of moved) {
          await owner.waitForAgent(address, (a) => a.state === 'running');
        }
        assert.deepEqual([...third.running].sort(), [...moved].sort());
        for (const address of addresses) await owner.stop(address);
        for (const address of addresses) {
          await owner.waitForAgent(address, (a) => a.state === 'stopped');
        }
      } finally {
        await Promise.all([first.stop(), second.stop(), third?.stop()]);
        runner = await startRunner(server, { crashLoopCount: 4 });
      }
    });

    it('restarts a running agent at once when its code changes', async () => {
      const program = (version: number) =>
        `import time\nprint("version ${version}", flush=True)\nwhile True: time.sleep(1)\n`;
      const address = await owner.deploy('changing', { 'agent.py': program(1) });
      await owner.waitForLog(address, /^version 1$/);
      await owner.setCode(address, { 'agent.py': program(2) });
      await owner.waitForLog(address, /^version 2$/, 5000);
      const agent = await owner.waitForAgent(address, (a) => a.state === 'running');
      assert.equal(agent.restarts, 0, 'a new version is no crash');
      await owner.stop(address);
    });

    it('starts a failed agent afresh when its owner starts it between a round’s renewal and its claim', async () => {
      // Starting a failed agent frees it for any runner. When the start falls between the
      // renewal of a round and its claim, the runner that gave up on it takes it back in the
      // same round: it must start it again, not keep the process that gave up. The start is
      // made to fall there: this runner's hosting runs it right after a renewal.
      await runner.stop();
      const { ctx } = server.server;
      let betweenRenewalAndClaim: (() => Promise<void>) | undefined;
      const hosting = new Proxy(ctx.services.hosting, {
        get(target, property) {
          if (property === 'renew') {
            return async (...args: Parameters<typeof target.renew>) => {
              const held = await target.renew(...args);
              const run = betweenRenewalAndClaim;
              betweenRenewalAndClaim = undefined;
              await run?.();
              return held;
            };
          }
          const value: unknown = Reflect.get(target, property, target);
          return typeof value === 'function'
            ? (value as (...args: unknown[]) => unknown).bind(target)
            : value;
        },
      });
      const racing = createHostingRunner(
        { ...ctx, services: { ...ctx.services, hosting } },
        { ...FAST_RUNNER, crashLoopCount: 2 },
      );
      await racing.start();
      try {
        const address = await owner.deploy('started-again', {
          'agent.py':
            'import time\nprint("started", time.time(), flush=True)\nraise SystemExit(3)\n',
        });
        await owner.waitForAgent(address, (a) => a.state === 'failed');
        const starts = async () =>
          (await owner.logs(address)).filter((l) => l.log_entry.startsWith('started ')).length;
        const before = await starts();
        assert.equal(before, 2, 'two crashes make a crash loop here');
        let started = false;
        betweenRenewalAndClaim = async () => {
          await owner.start(address);
          started = true;
        };
        const until = Date.now() + 15_000;
        while (!(started && (await starts()) > before) && Date.now() < until) await sleep(100);
        assert.ok(started, 'the start fell between a renewal and a claim');
        assert.ok(
          (await starts()) > before,
          `started again; last seen ${JSON.stringify(await owner.agent(address))}`,
        );
        await owner.stop(address);
        await owner.waitForAgent(address, (a) => a.state === 'stopped');
      } finally {
        await racing.stop();
        runner = await startRunner(server, { crashLoopCount: 4 });
      }
    });
  });
});

describe('hosted agents: the serving process runs them', { skip }, () => {
  it('starts its runner when AGENTRY_HOSTING_PYTHON is set, and stops its agents when it closes', async () => {
    const hosted = hostingDir();
    const server = await startTestServer({
      config: { hosting: hostingConfig({ dir: hosted.dir, runner: 'serve', sandbox: 'off' }) },
    });
    let closed = false;
    try {
      const owner = new Owner(server);
      const address = await owner.deploy('served', {
        'agent.py':
          'import os, time\nopen("pid", "w").write(str(os.getpid()))\nprint("up", flush=True)\nwhile True: time.sleep(1)\n',
      });
      await owner.waitForLog(address, /^up$/);
      const pid = Number(readFileSync(join(hosted.dir, address, 'home', 'pid'), 'utf8'));
      assert.ok(alive(pid));
      await server.close();
      closed = true;
      assert.equal(alive(pid), false, 'the agent stopped with the server');
    } finally {
      if (!closed) await server.close();
      hosted.remove();
    }
  });
});

describe('hosted agents: an owner reaches the runner of the same process at once', { skip }, () => {
  it('starts, restarts with new code and stops an agent without waiting for the runner’s next round', async () => {
    const hosted = hostingDir();
    const server = await startTestServer({
      config: { hosting: hostingConfig({ dir: hosted.dir, sandbox: 'off' }) },
    });
    // A round every ten minutes: only the owner's calls can make anything happen in time.
    const runner = await startRunner(server, { tickMs: 600_000 });
    try {
      const owner = new Owner(server);
      const forever = 'import time\nprint("{}", flush=True)\nwhile True: time.sleep(1)\n';
      const address = await owner.deploy('prompt', { 'agent.py': forever.replace('{}', 'one') });
      await owner.waitForLog(address, /^one$/, 5_000);
      await owner.setCode(address, { 'agent.py': forever.replace('{}', 'two') });
      await owner.waitForLog(address, /^two$/, 5_000);
      await owner.stop(address);
      await owner.waitForAgent(address, (agent) => agent.state === 'stopped', 5_000);
      assert.deepEqual(runner.running, []);
    } finally {
      await runner.stop();
      await server.close();
      hosted.remove();
    }
  });
});
