import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { hostOf, registerAgent } from '../kit/agents.js';
import { call } from '../kit/http.js';
import { agentryArgs, ChildRun } from '../kit/process.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/**
 * A reader that stops early (`agentry … --json | head -1`) ends the command quietly: exit
 * code 0 and nothing on stderr. The listings are longer than a pipe holds (64 KiB), so that
 * the command is still writing when the reader goes.
 */
describe('command line: a reader that stops early', () => {
  const messages = 400;
  let t: TestServer;
  let db: string[];
  const target = TestIdentity.random();

  before(async () => {
    t = await startTestServer();
    db = ['--database-url', t.config.databaseUrl];
    await registerAgent(hostOf(t), t.userKey, target);
    const sender = TestIdentity.random();
    for (let i = 0; i < messages; i++) {
      const envelope = sender.signEnvelope(
        makeEnvelope({
          sender: sender.address,
          target: target.address,
          payloadJson: JSON.stringify({ i }),
        }),
      );
      const res = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
      assert.equal(res.status, 200, res.text);
    }
  });
  after(() => t.close());

  for (const command of ['activity', 'deliveries']) {
    it(`${command} --json | head -1 ends with exit code 0 and nothing on stderr`, async () => {
      const args = agentryArgs(command, target.address, '--json', '--limit', '1000', ...db);
      const line = [process.execPath, ...args].map((arg) => `'${arg}'`).join(' ');
      const child = ChildRun.spawn(`agentry ${command} | head -1`, 'bash', [
        '-c',
        `set -o pipefail; ${line} | head -1`,
      ]);
      const code = await child.waitForExit();
      assert.equal(child.stderr(), '');
      assert.equal(code, 0);
      const lines = child.stdout().trim().split('\n');
      assert.equal(lines.length, 1);
      assert.ok(JSON.parse(lines[0]!));
    });
  }
});
