import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  hostingConfig,
  hostingDir,
  hostingSkipReason,
  Owner,
  startRunner,
} from '../kit/hosted-agents.js';
import { startTestServer, type TestServer } from '../kit/server.js';

/**
 * The runner's limits where it has no control groups: it counts an agent's processes and
 * samples its CPU time itself. An agent runs at a lower priority than the tests there, so
 * `npm test` runs this file by itself (test/run.ts): beside other busy files a spinning agent
 * would not get the share of a core it is to be stopped for.
 */

const skip = hostingSkipReason('off');

describe('hosted agents: limits without control groups', { skip }, () => {
  let server: TestServer;
  let runner: Awaited<ReturnType<typeof startRunner>>;
  let owner: Owner;
  const hosted = hostingDir();

  before(async () => {
    server = await startTestServer({
      config: {
        hosting: hostingConfig({ dir: hosted.dir, sandbox: 'off', cpuPercent: 20, processes: 16 }),
      },
    });
    runner = await startRunner(server, { controlGroups: false, cpuWindowMs: 1500 });
    owner = new Owner(server);
  });

  after(async () => {
    await runner?.stop();
    await server?.close();
    hosted.remove();
  });

  it('stops an agent that stays above its CPU share, sampling its CPU time', async () => {
    const address = await owner.deploy('spinner', { 'agent.py': 'while True: pass\n' });
    const crashed = await owner.waitForAgent(address, (a) => a.state === 'crashed');
    assert.match(
      crashed.stateReason ?? '',
      /^cpu limit \(\d+% of a core for 2 s; the share is 20%\)/,
    );
    const logs = await owner.logs(address);
    assert.ok(
      logs.some((l) =>
        /^limits: .*cpu 20% \(lower priority, stopped when above its share for 2 s\)/.test(
          l.log_entry,
        ),
      ),
    );
    await owner.stop(address);
  });

  it('stops an agent with more processes than its limit, counting them', async () => {
    const address = await owner.deploy('spawner', {
      'agent.py': [
        'import subprocess, time',
        'children = [subprocess.Popen(["sleep", "30"]) for _ in range(20)]',
        'print("spawned", flush=True)',
        'time.sleep(30)',
      ].join('\n'),
    });
    const crashed = await owner.waitForAgent(address, (a) => a.state === 'crashed');
    assert.match(crashed.stateReason ?? '', /^too many processes \(the limit is 16\)/);
    await owner.stop(address);
  });
});
