import assert from 'node:assert/strict';
import { once } from 'node:events';
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConfigError } from '../../src/config/index.js';
import {
  bootstrapPath,
  Sandbox,
  spawnPlan,
  type AgentPaths,
  type SandboxSettings,
} from '../../src/runner/sandbox.js';
import { hostingDir, hostingSkipReason, sleep, TEST_PYTHON } from '../kit/hosted-agents.js';

/** The sandbox's command line, run for real: what reaches the agent and what does not. */

const settings = (changes: Partial<SandboxSettings> = {}): SandboxSettings => ({
  mode: 'bwrap',
  egress: 'agentry',
  python: TEST_PYTHON,
  uidBase: 2_000_000_000,
  limits: { memoryMb: 256, cpuPercent: 30, processes: 32, openFiles: 64, diskMb: 8 },
  ...changes,
});

describe('the hosting sandbox', { skip: hostingSkipReason('bwrap') }, () => {
  const scratch = hostingDir();
  let sandbox: Sandbox;
  let paths: AgentPaths;
  // As a runner does: the agents' users read a copy of the bootstrap, wherever the checkout is.
  const bootstrap = join(scratch.dir, 'bootstrap.py');
  copyFileSync(bootstrapPath(), bootstrap);
  chmodSync(bootstrap, 0o644);
  const prepare = (changes: Partial<SandboxSettings>, tag: string): Promise<Sandbox> =>
    Sandbox.prepare(settings(changes), tag, { bootstrap });

  before(async () => {
    sandbox = await prepare({}, `agentry-test-${process.pid}`);
    const base = join(scratch.dir, 'agent');
    paths = {
      home: join(base, 'home'),
      packages: join(base, 'packages'),
      bridgeSocket: join(base, 'bridge.sock'),
    };
    mkdirSync(paths.home, { recursive: true });
    mkdirSync(paths.packages, { recursive: true });
    const uid = sandbox.uidOf(1);
    if (uid !== undefined) chownSync(paths.home, uid, uid);
  });

  after(async () => {
    await sandbox?.close();
    scratch.remove();
  });

  /** Starts a Python program in the sandbox, with a network so that no bridge is needed. */
  async function run(program: string, env: Record<string, string> = {}) {
    const plan = await sandbox.plan({
      slot: 1,
      paths,
      env,
      network: true,
      pythonArgs: ['-c', program],
    });
    const child = spawnPlan(plan, 'ignore');
    let output = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    return {
      plan,
      child,
      output: () => output,
      async end() {
        process.kill(-child.pid!, 'SIGKILL');
        await plan.cgroup?.remove();
        if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
      },
    };
  }

  it("gives the agent its environment, and no wrapper's command line or environment holds it", async () => {
    const secret = `secret-${Math.random()}`;
    const agent = await run(
      'import os, sys, time\nprint(sorted(os.environ), os.environ["API_TOKEN"], flush=True)\ntime.sleep(30)',
      { API_TOKEN: secret },
    );
    try {
      const until = Date.now() + 10_000;
      while (!agent.output().includes(secret) && Date.now() < until) await sleep(50);
      assert.match(agent.output(), new RegExp(`'API_TOKEN'.*${secret}`));
      assert.doesNotMatch(agent.output(), /'AGENTRY_DATABASE_URL'|'NODE_/);
      // Every process of the agent but the interpreter itself: the wrappers and the sandbox.
      const pids = agent.plan.cgroup ? await agent.plan.cgroup.pids() : [agent.child.pid!];
      let wrappers = 0;
      for (const pid of pids) {
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        assert.ok(!cmdline.includes(secret), `the command line of ${pid}: ${cmdline}`);
        if (cmdline.includes('bwrap')) {
          wrappers += 1;
          assert.ok(!readFileSync(`/proc/${pid}/environ`, 'utf8').includes(secret));
        }
      }
      assert.ok(wrappers >= 1, 'the sandbox process was looked at');
    } finally {
      await agent.end();
    }
  });

  it('holds a busy agent to its CPU share with a control group, where one can be made', async (t) => {
    if (sandbox.cpuMeasure !== 'cgroup') {
      t.skip('no writable cpu control group here: the runner samples CPU time instead');
      return;
    }
    const agent = await run('while True: pass');
    try {
      await sleep(300);
      const pids = await agent.plan.cgroup!.pids();
      const ticks = (): number =>
        pids.reduce((sum, pid) => {
          try {
            const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
            return sum + Number(fields[11]) + Number(fields[12]);
          } catch {
            return sum;
          }
        }, 0);
      const before = ticks();
      await sleep(1500);
      const percent = (ticks() - before) / 1.5;
      assert.ok(percent <= 40, `used ${percent}% of a core; its share is 30%`);
      assert.ok(percent >= 15, `used ${percent}% of a core: it did run`);
    } finally {
      await agent.end();
    }
  });

  it('runs an interpreter of a virtual environment, one under /tmp included', async () => {
    const venv = join(scratch.dir, 'venv');
    execFileSync(TEST_PYTHON, ['-m', 'venv', '--without-pip', venv]);
    const python = join(venv, 'bin', 'python3');
    const inVenv = await prepare({ python }, `agentry-test-venv-${process.pid}`);
    const probe = { ...paths, home: join(scratch.dir, 'venv-probe') };
    mkdirSync(probe.home);
    const uid = inVenv.uidOf(0);
    if (uid !== undefined) chownSync(probe.home, uid, uid);
    try {
      await inVenv.check(probe);
    } finally {
      await inVenv.close();
    }
  });

  it('says why at start when the interpreter cannot run in the sandbox', async () => {
    // An interpreter outside what the sandbox shows (a link in a directory no agent sees).
    const elsewhere = join(scratch.dir, 'private-python');
    mkdirSync(elsewhere, { mode: 0o700 });
    symlinkSync(TEST_PYTHON, join(elsewhere, 'python3'));
    const broken = await prepare(
      { python: join(elsewhere, 'python3') },
      `agentry-test-broken-${process.pid}`,
    );
    // The start-up check runs as the first agent user, in a directory of its own.
    const probe = { ...paths, home: join(scratch.dir, 'probe') };
    mkdirSync(probe.home);
    const uid = broken.uidOf(0);
    if (uid !== undefined) chownSync(probe.home, uid, uid);
    try {
      await assert.rejects(broken.check(probe), (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.match(
          err.message,
          /^The hosting sandbox cannot start .*private-python\/python3: bwrap: execvp .*No such file/,
        );
        // Where agents run as users of their own, the directory they cannot pass is named.
        if (uid !== undefined) assert.match(err.message, /private-python is mode 0700/);
        else assert.match(err.message, /AGENTRY_HOSTING_PYTHON is outside what the sandbox shows/);
        return true;
      });
    } finally {
      await broken.close();
    }
  });

  it('refuses an interpreter it cannot run, naming the setting', async () => {
    await assert.rejects(
      Sandbox.prepare(settings({ python: '/nonexistent/python3' }), 'agentry-test-nopython'),
      /^ConfigError: AGENTRY_HOSTING_PYTHON \(\/nonexistent\/python3\) must be a Python interpreter/,
    );
  });
});
