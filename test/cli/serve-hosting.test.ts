import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { hostingSkipReason, sleep, TEST_PYTHON } from '../kit/hosted-agents.js';
import { call } from '../kit/http.js';
import { freePort } from '../kit/ports.js';
import { agentryArgs, ChildRun } from '../kit/process.js';
import { realClient } from '../kit/real-client.js';

/**
 * `agentry serve` with a runner of hosted agents that cannot run here: it refuses to start
 * before it listens (a supervisor's first health check fails), exits 2 and says why in a
 * sentence that names what to change.
 */

describe(
  'agentry serve: a runner that cannot run agents',
  { skip: hostingSkipReason('bwrap') },
  () => {
    const scratch = mkdtempSync(join(tmpdir(), 'agentry-serve-hosting-'));
    // Open to the agents' users: only what a case closes is closed.
    chmodSync(scratch, 0o755);
    after(() => rmSync(scratch, { recursive: true, force: true }));

    /** Runs `agentry serve` until it exits, asking for /health meanwhile; what it said and did. */
    async function serve(name: string, python: string) {
      const dataDir = join(scratch, `${name}-data`);
      mkdirSync(dataDir, { mode: 0o755 });
      chmodSync(dataDir, 0o755);
      const port = await freePort();
      const child = ChildRun.node(
        'agentry serve',
        agentryArgs('serve', '--data-dir', dataDir, '--port', String(port)),
        {
          ...process.env,
          AGENTRY_HOSTING_PYTHON: python,
          AGENTRY_HOSTING_SANDBOX: 'bwrap',
          AGENTRY_LOG_LEVEL: 'warn',
        },
      );
      let answered = 0;
      while (!child.hasExited()) {
        const health = await call(`http://127.0.0.1:${port}`, 'GET', '/health').catch(
          () => undefined,
        );
        if (health !== undefined) answered += 1;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return { code: await child.waitForExit(), output: child.output(), answered };
    }

    it('refuses a wrapper script outside the interpreter’s installation, saying to name the interpreter', async () => {
      const bin = join(scratch, 'wrapper-bin');
      mkdirSync(bin, { mode: 0o755 });
      const wrapper = join(bin, 'python');
      writeFileSync(wrapper, `#!/bin/sh\nexec ${TEST_PYTHON} "$@"\n`, { mode: 0o755 });
      const result = await serve('wrapper', wrapper);
      assert.equal(result.code, 2, result.output);
      assert.equal(result.answered, 0, 'it never answered /health');
      assert.doesNotMatch(result.output, /Agentry is running|agentry listening/);
      const lines = result.output.split('\n').filter((line) => line.startsWith('agentry: '));
      assert.equal(lines.length, 1, result.output);
      assert.match(
        lines[0]!,
        new RegExp(
          `^agentry: The hosting sandbox cannot start ${wrapper}: .*AGENTRY_HOSTING_PYTHON is a script outside the interpreter's installation \\(/usr\\).*point AGENTRY_HOSTING_PYTHON at the interpreter itself \\(/usr/bin/python3(\\.\\d+)?\\)`,
        ),
      );
      assert.doesNotMatch(lines[0]!, /readable and searchable/);
    });

    it(
      'refuses an interpreter under a directory the agents’ users cannot search, naming it',
      {
        skip: process.getuid?.() === 0 ? false : 'agents run as users of their own only under root',
      },
      async () => {
        const home = join(scratch, 'private-home');
        mkdirSync(home, { mode: 0o700 });
        chmodSync(home, 0o700);
        symlinkSync(TEST_PYTHON, join(home, 'python3'));
        const result = await serve('private', join(home, 'python3'));
        assert.equal(result.code, 2, result.output);
        assert.equal(result.answered, 0, 'it never answered /health');
        assert.match(
          result.output,
          new RegExp(
            `^agentry: The hosting sandbox cannot start .*: .*; agents run as users \\d+ and up, and ${home} is mode 0700`,
            'm',
          ),
        );
      },
    );
  },
);

/**
 * `agentry serve` as the README starts it, with nothing about hosting set: it looks for a
 * Python that can run hosted agents (a `.venv` where it starts, then `python3` on the PATH),
 * says in its start-up block whether hosted agents run and, when they do not, the one command
 * that lets them; where the machine's python3 has uagents, a hosted agent made from the
 * console's template runs.
 */
describe('agentry serve: hosted agents on the README’s path', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'agentry-serve-readme-'));
  after(() => rmSync(scratch, { recursive: true, force: true }));

  /** The environment of a shell that set nothing about hosting, with `path` as its PATH. */
  function shellEnv(path: string): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: path, AGENTRY_LOG_LEVEL: 'warn' };
    for (const name of Object.keys(env)) {
      if (name.startsWith('AGENTRY_HOSTING_') || name === 'VIRTUAL_ENV') delete env[name];
    }
    return env;
  }

  /** Starts `agentry serve` in a directory of its own; its URL once its block is printed. */
  async function serve(name: string, env: NodeJS.ProcessEnv) {
    const home = join(scratch, name);
    mkdirSync(home);
    const child = ChildRun.node(
      'agentry serve',
      agentryArgs('serve', '--data-dir', join(home, 'data'), '--port', '0'),
      env,
      home,
    );
    const [, url] = await child.waitForOutput(/Agentry is running on (http:\/\/\S+)/, 60_000);
    return { child, url: url!, home };
  }

  it('says hosted agents are off when python3 has no uagents, and the one command that enables them', async () => {
    // A python3 without uagents: a virtual environment of the system's Python, which sees none
    // of the system's packages.
    const base = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
    const bare = join(scratch, 'bare-venv');
    const made = spawnSync(base, ['-m', 'venv', '--without-pip', bare], { encoding: 'utf8' });
    assert.equal(made.status, 0, made.stderr);
    const version = spawnSync(
      join(bare, 'bin', 'python3'),
      ['-c', 'import platform; print(platform.python_version())'],
      {
        encoding: 'utf8',
      },
    ).stdout.trim();
    const { child, url } = await serve('off', shellEnv(`${join(bare, 'bin')}:/usr/bin:/bin`));
    try {
      const block = child.stdout();
      assert.ok(
        block.includes(
          `  Hosted     off: python3 (Python ${version}) has no uagents. To run hosted agents: python3 -m venv .venv && .venv/bin/pip install uagents, then start again\n`,
        ),
        block,
      );
      // No agents run here, so no hosting key is made.
      assert.doesNotMatch(block, /hosting key/);
      // The console hears the same.
      const key = /^\s+(agy_\S+)$/m.exec(block)![1]!;
      const status = await call(url, 'GET', '/v1/hosting/status', { key });
      assert.equal(status.status, 200, status.text);
      assert.deepEqual(status.body, {
        ready: false,
        runners: 0,
        python: null,
        reason: `python3 (Python ${version}) has no uagents`,
        enable: 'python3 -m venv .venv && .venv/bin/pip install uagents',
      });
    } finally {
      await child.stop();
    }
  });

  const real = realClient('AGENTRY_TEST_PYTHON', { series: '0.25' });

  it(
    'runs a hosted agent made from the template where python3 has uagents, with nothing set',
    { skip: real.skip },
    async () => {
      // The interpreter as the PATH finds it: python3 in the environment's bin.
      const python = join(dirname(real.python!), 'python3');
      const { child, url, home } = await serve(
        'ready',
        shellEnv(`${dirname(python)}:/usr/bin:/bin`),
      );
      try {
        const block = child.stdout();
        assert.match(
          block,
          new RegExp(
            `^  Hosted     ready: agents run with ${python.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(Python 3\\.\\d+\\.\\d+, uagents ${real.version}\\)$`,
            'm',
          ),
        );
        // The hosting key came into being with the first start, beside the database.
        const keyFile = join(home, 'data', 'agentry.db.hosting-key');
        assert.ok(block.includes(`First start: made the hosting key ${keyFile}`), block);
        assert.equal(statSync(keyFile).mode & 0o777, 0o600);

        const key = /^\s+(agy_\S+)$/m.exec(block)![1]!;
        const status = await call(url, 'GET', '/v1/hosting/status', { key });
        assert.equal(status.body.ready, true, status.text);
        assert.equal(status.body.python, python);

        // As the console makes one: the agent, then the template as its code, then Start.
        const made = await call(url, 'POST', '/v1/hosting/agents', {
          key,
          body: { name: 'hello bot' },
        });
        assert.equal(made.status, 200, made.text);
        const address = made.body.address as string;
        const template = [
          {
            name: 'agent.py',
            language: 'python',
            value: [
              'from uagents import Context',
              '',
              '',
              '@agent.on_interval(period=10.0)',
              'async def hello(ctx: Context):',
              '    ctx.logger.info(f"Hello from {agent.name}")',
              '',
            ].join('\n'),
          },
        ];
        const put = await call(url, 'PUT', `/v1/hosting/agents/${address}/code`, {
          key,
          body: { code: JSON.stringify(template) },
        });
        assert.equal(put.status, 200, put.text);
        const started = await call(url, 'POST', `/v1/hosting/agents/${address}/start`, { key });
        assert.equal(started.status, 200, started.text);

        const until = Date.now() + 90_000;
        let lines: { log_entry: string }[] = [];
        while (Date.now() < until) {
          const logs = await call(url, 'GET', `/v1/hosting/agents/${address}/logs/latest`, { key });
          lines = logs.body;
          if (lines.some((line) => /Hello from hello/.test(line.log_entry))) break;
          await sleep(250);
        }
        assert.ok(
          lines.some((line) => /Hello from hello/.test(line.log_entry)),
          lines.map((line) => line.log_entry).join('\n'),
        );
        const agent = await call(url, 'GET', `/v1/hosting/agents/${address}`, { key });
        assert.equal(agent.body.state, 'running', agent.text);
      } finally {
        await child.stop();
      }
    },
  );
});
