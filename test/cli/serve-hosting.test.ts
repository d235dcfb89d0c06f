import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { hostingSkipReason, TEST_PYTHON } from '../kit/hosted-agents.js';
import { call } from '../kit/http.js';
import { freePort } from '../kit/ports.js';
import { agentryArgs, ChildRun } from '../kit/process.js';

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
