import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  alive,
  hostingConfig,
  hostingDir,
  hostingSkipReason,
  Owner,
  TEST_PYTHON,
} from '../kit/hosted-agents.js';
import { agentryArgs, ChildRun, runAgentry } from '../kit/process.js';
import { startTestServer } from '../kit/server.js';

/** `agentry runner`: a process that runs hosted agents only, beside servers on one database. */

describe('agentry runner', { skip: hostingSkipReason('off') }, () => {
  it('refuses to start without AGENTRY_HOSTING_PYTHON, saying what to set', async () => {
    const server = await startTestServer();
    try {
      const result = runAgentry(['runner', '--database-url', server.config.databaseUrl], {
        AGENTRY_HOSTING_PYTHON: '',
      });
      assert.equal(result.code, 2, result.stderr);
      assert.match(
        result.stderr,
        /^agentry: agentry runner runs hosted agents with .*AGENTRY_HOSTING_PYTHON/,
      );
    } finally {
      await server.close();
    }
  });

  it('runs the agents of its database and, on SIGTERM, stops them and lets them go', async () => {
    const hosted = hostingDir();
    const server = await startTestServer({
      config: { hosting: hostingConfig({ dir: hosted.dir, runner: 'separate' }) },
    });
    const runner = ChildRun.node(
      'agentry runner',
      agentryArgs('runner', '--database-url', server.config.databaseUrl),
      {
        ...process.env,
        AGENTRY_HOSTING_PYTHON: TEST_PYTHON,
        AGENTRY_HOSTING_DIR: hosted.dir,
        AGENTRY_PUBLIC_URL: server.url,
        AGENTRY_LOG_LEVEL: 'info',
        AGENTRY_LOG_FORMAT: 'json',
      },
    );
    try {
      await runner.waitForOutput(/"msg":"hosting runner started"/, 30_000);
      const owner = new Owner(server);
      const address = await owner.deploy('apart', {
        'agent.py':
          'import os, time\nopen("pid", "w").write(str(os.getpid()))\nprint("up", flush=True)\nwhile True: time.sleep(1)\n',
      });
      await owner.waitForLog(address, /^up$/);
      const pid = Number(readFileSync(join(hosted.dir, address, 'home', 'pid'), 'utf8'));
      assert.ok(alive(pid));

      await runner.stop();
      assert.equal(await runner.waitForExit(), 0, runner.output());
      assert.equal(alive(pid), false, 'the agent stopped with its runner');
      const agent = await owner.agent(address);
      assert.equal(agent.state, 'stopped');
      assert.match(agent.stateReason ?? '', /^Its runner stopped/);
    } finally {
      await runner.stop();
      await server.close();
      hosted.remove();
    }
  });
});
