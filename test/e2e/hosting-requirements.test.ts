import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { HostingRunner } from '../../src/runner/runner.js';
import {
  hostingConfig,
  hostingDir,
  hostingSkipReason,
  Owner,
  startRunner,
  TEST_PYTHON,
  type LogLine,
} from '../kit/hosted-agents.js';
import { makeWheel, PackageIndex, pipSkipReason } from '../kit/package-index.js';
import { startTestServer, type TestServer } from '../kit/server.js';

/**
 * An agent's requirements.txt installed from a private package index, as an operator without
 * the public index meets it: the index (a loopback HTTP server of the test's own, with wheels
 * the test makes) is named in requirements.txt, the agent is deployed through the Hosting API,
 * and what it imports is what pip installed. Without the sandbox and in bubblewrap, where pip
 * has the machine's network and the agent itself (egress `agentry`) must not reach the index.
 * On SQLite alone: what is tested is the runner's, and hosting-runner.test.ts runs the runner
 * over each dialect.
 */

const PROJECT = 'agentry-probe';

function probeWheel(version: string) {
  return makeWheel(PROJECT, version, {
    'agentry_probe/__init__.py': [
      `VERSION = "${version}"`,
      '',
      'def greeting():',
      `    return "hello from ${PROJECT} " + VERSION`,
      '',
    ].join('\n'),
  });
}

const installs = (logs: LogLine[]): number =>
  logs.filter((l) => l.log_type === 'system' && l.log_entry === 'installing requirements.txt')
    .length;

for (const sandbox of ['off', 'bwrap'] as const) {
  const skip = hostingSkipReason(sandbox) ?? pipSkipReason(TEST_PYTHON);

  describe(
    `hosted agents: requirements from a private index (sandbox ${sandbox})`,
    { skip },
    () => {
      let server: TestServer;
      let runner: HostingRunner;
      let owner: Owner;
      let index: PackageIndex;
      const hosted = hostingDir();

      before(async () => {
        index = await PackageIndex.start([probeWheel('1.0'), probeWheel('2.0')]);
        server = await startTestServer({
          config: {
            hosting: hostingConfig({
              dir: hosted.dir,
              sandbox,
              egress: 'agentry',
              allowRequirements: true,
            }),
          },
        });
        runner = await startRunner(server);
        owner = new Owner(server);
      });

      after(async () => {
        await runner?.stop();
        await server?.close();
        await index?.close();
        hosted.remove();
      });

      /** agent.py: prints what the installed package says and where it was imported from. */
      const agentPy = (tag: string): string =>
        [
          'import time',
          'import agentry_probe',
          `print("${tag}", agentry_probe.greeting(), "from", agentry_probe.__file__, flush=True)`,
          'while True: time.sleep(1)',
        ].join('\n');

      it('installs requirements.txt from the index it names, while compiling, and installs it again only when it changes', async () => {
        // The download waits until the test has seen the agent compiling.
        const release = index.holdDownloads();
        const fromIndex = `--index-url ${index.url}/simple/\n${PROJECT}==1.0\n`;
        const address = await owner.deploy('needs-probe', {
          'agent.py': agentPy('first'),
          'requirements.txt': fromIndex,
        });
        try {
          const compiling = await owner.waitForAgent(address, (a) => a.state === 'compiling');
          assert.equal(compiling.stateReason, 'Installing requirements.txt');
        } finally {
          release();
        }
        await owner.waitForAgent(address, (a) => a.state === 'running', 60_000);
        const installed =
          sandbox === 'bwrap' ? '/agent-packages' : join(hosted.dir, address, 'packages');
        const first = await owner.waitForLog(address, /^first hello from /);
        assert.equal(
          first.log_entry,
          `first hello from ${PROJECT} 1.0 from ${installed}/agentry_probe/__init__.py`,
          'the agent imports the package pip installed into its own directory',
        );
        let logs = await owner.logs(address);
        assert.equal(installs(logs), 1);
        assert.ok(
          logs.some((l) => /^Successfully installed agentry-probe-1\.0$/.test(l.log_entry)),
          `pip's output is in the log:\n${logs.map((l) => l.log_entry).join('\n')}`,
        );
        assert.deepEqual(index.requests, [
          `GET /simple/${PROJECT}/`,
          'GET /files/agentry_probe-1.0-py3-none-any.whl',
        ]);

        // Started again with the same requirements: nothing is installed.
        await owner.stop(address);
        await owner.waitForAgent(address, (a) => a.state === 'stopped');
        await owner.start(address);
        await owner.waitForAgent(address, (a) => a.state === 'running');
        await waitForLines(owner, address, /^first hello from /, 2);
        // New code beside the same requirements.txt: restarted, nothing installed.
        await owner.setCode(address, {
          'agent.py': agentPy('second'),
          'requirements.txt': fromIndex,
        });
        await owner.waitForLog(address, /^second hello from agentry-probe 1\.0 /);
        logs = await owner.logs(address);
        assert.equal(installs(logs), 1, 'installed once for the same requirements.txt');
        assert.deepEqual(index.requests.slice(2), [], 'the index was not asked again');

        // Changed requirements, this time from a page of links: installed afresh.
        await owner.setCode(address, {
          'agent.py': agentPy('third'),
          'requirements.txt': `--no-index\n--find-links ${index.url}/files/\n${PROJECT}==2.0\n`,
        });
        const third = await owner.waitForLog(address, /^third hello from /, 60_000);
        assert.equal(
          third.log_entry,
          `third hello from ${PROJECT} 2.0 from ${installed}/agentry_probe/__init__.py`,
        );
        assert.equal(installs(await owner.logs(address)), 2);
        assert.deepEqual(index.requests.slice(2), [
          'GET /files/',
          'GET /files/agentry_probe-2.0-py3-none-any.whl',
        ]);
        const packages = join(hosted.dir, address, 'packages');
        assert.ok(existsSync(join(packages, 'agentry_probe-2.0.dist-info')));
        assert.ok(
          !existsSync(join(packages, 'agentry_probe-1.0.dist-info')),
          'what the old requirements installed is gone',
        );
        await owner.stop(address);
        await owner.waitForAgent(address, (a) => a.state === 'stopped');
      });

      if (sandbox === 'bwrap') {
        it('lets pip reach the index, and not the agent: its egress is this Agentry only', async () => {
          const before = index.requests.length;
          const address = await owner.deploy('probe-egress', {
            'agent.py': [
              'import time, urllib.request',
              'import agentry_probe',
              'print("imported", agentry_probe.VERSION, flush=True)',
              'try:',
              `    urllib.request.urlopen("${index.url}/simple/", timeout=3)`,
              '    print("REACHED the index", flush=True)',
              'except Exception as err:',
              '    print("BLOCKED", type(err).__name__, flush=True)',
              'while True: time.sleep(1)',
            ].join('\n'),
            'requirements.txt': `--index-url ${index.url}/simple/\n${PROJECT}\n`,
          });
          await owner.waitForLog(address, /^(REACHED|BLOCKED)/, 60_000);
          const entries = (await owner.logs(address)).map((l) => l.log_entry);
          assert.ok(entries.includes('imported 2.0'), entries.join('\n'));
          assert.ok(!entries.includes('REACHED the index'), entries.join('\n'));
          assert.ok(entries.some((e) => e.startsWith('BLOCKED ')));
          assert.deepEqual(
            index.requests.slice(before),
            [`GET /simple/${PROJECT}/`, 'GET /files/agentry_probe-2.0-py3-none-any.whl'],
            "pip's requests, and none of the agent's",
          );
          await owner.stop(address);
          await owner.waitForAgent(address, (a) => a.state === 'stopped');
        });
      }
    },
  );
}

/** Waits until `count` lines of the agent's log match `pattern`. */
async function waitForLines(
  owner: Owner,
  address: string,
  pattern: RegExp,
  count: number,
): Promise<void> {
  const until = Date.now() + 15_000;
  for (;;) {
    const lines = (await owner.logs(address)).filter((l) => pattern.test(l.log_entry));
    if (lines.length >= count) return;
    if (Date.now() > until) {
      assert.fail(`${lines.length} lines matched ${pattern}, not ${count}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
