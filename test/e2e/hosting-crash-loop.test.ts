import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { HostingRunner } from '../../src/runner/runner.js';
import type { TimelineEntry } from '../../src/wire/activity.js';
import { capturingLogger, WARN } from '../kit/captured-log.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import {
  hostingConfig,
  hostingDir,
  hostingSkipReason,
  Owner,
  sleep,
  startRunner,
} from '../kit/hosted-agents.js';
import { call } from '../kit/http.js';
import { waitFor } from '../kit/real-client.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { startWebhookSink } from '../kit/webhook-sink.js';

/**
 * A crash loop is one failure (docs/hosting.md, "Errors"): a real runner restarts a real Python
 * program that exits with an error at once, again and again, and its crashes are one timeline
 * row counted in place, one warning and one webhook when it begins, one of each when it
 * recovers.
 */

const skip = hostingSkipReason('off');

describe('hosted agents', { skip }, () => {
  describeOnEachDialect('a crash loop', (dialect) => {
    let server: TestServer;
    let runner: HostingRunner;
    let owner: Owner;
    let sink: Awaited<ReturnType<typeof startWebhookSink>>;
    const log = capturingLogger();
    const hosted = hostingDir();

    before(async () => {
      sink = await startWebhookSink();
      server = await startTestServer({
        dialect,
        logger: log.logger,
        config: {
          allowPrivateTargets: true,
          agentErrorSeconds: 2,
          hosting: hostingConfig({
            key: 'cd'.repeat(32),
            dir: hosted.dir,
            sandbox: 'off',
          }),
        },
      });
      // Restarted for ever (limited only by the wait between restarts, which stays short here).
      runner = await startRunner(server, {
        crashLoopCount: 1000,
        restartBaseMs: 100,
        restartMaxMs: 300,
      });
      owner = new Owner(server);
    });

    after(async () => {
      await runner?.stop();
      await server?.close();
      await sink?.close();
      hosted.remove();
    });

    it('counts the crashes of an agent restarted again and again in one timeline row, told once as it begins and once as it recovers', async () => {
      const hook = await call(server.url, 'POST', '/v2/webhooks', {
        key: server.userKey,
        body: { url: `${sink.url}/hook`, kinds: ['event.error', 'agent.recovered'] },
      });
      assert.equal(hook.status, 201, hook.text);
      const address = await owner.deploy('crasher', {
        'agent.py': 'import sys\nsys.exit(3)\n',
      });
      const errorRows = async () => {
        const res = await call(server.url, 'GET', `/v2/agents/${address}/activity?kind=event`, {
          key: server.userKey,
        });
        assert.equal(res.status, 200, res.text);
        return (res.body.entries as TimelineEntry[]).filter((e) => e.kind === 'event.error');
      };
      const crashesOf = (entry: TimelineEntry) => (entry.data as { crashes: number }).crashes;
      const told = (kind: string) =>
        sink.received.filter((p) => p.kind === kind && p.agent === address);
      const warnings = () =>
        // Every warning of the server's about the agent (its status changes among them).
        log.lines.filter((l) => l.level >= WARN && l.agent === address);

      // The restart count is written before the crash is counted on the timeline, so a read
      // between the two sees the row one crash behind: each count is waited for.
      await owner.waitForAgent(address, (a) => a.restarts >= 3);
      const early = await waitFor(async () => {
        const rows = await errorRows();
        return rows.length !== 1 || crashesOf(rows[0]!) >= 3 ? rows : undefined;
      }, 'three crashes counted');
      assert.equal(early.length, 1, JSON.stringify(early));
      const first = crashesOf(early[0]!);
      assert.ok(first >= 3, `${first} crashes counted`);

      // More crashes: the same row, its count grown, its summary the last crash.
      const restarts = (await owner.agent(address)).restarts;
      await owner.waitForAgent(address, (a) => a.restarts >= restarts + 4);
      const later = await waitFor(async () => {
        const rows = await errorRows();
        return rows.length !== 1 || crashesOf(rows[0]!) >= first + 4 ? rows : undefined;
      }, 'the crashes counted');
      assert.equal(later.length, 1, JSON.stringify(later));
      assert.equal(later[0]!.id, early[0]!.id, 'updated in place');
      assert.match(
        later[0]!.summary,
        /^Hosted agent crashed: exited with code 3; restarting in \d+ ms \(failing: \d+ crashes so far\)$/,
      );
      const data = later[0]!.data as Record<string, unknown>;
      assert.equal(data.errors, 0);
      assert.deepEqual((data.hosted as { state: string }).state, 'crashed');
      const status = await call(server.url, 'GET', `/v2/agents/${address}`, {
        key: server.userKey,
      });
      assert.equal(status.body.status.status, 'failing');

      // One webhook and one warning for all of them.
      await waitFor(() => (told('event.error').length > 0 ? true : undefined), 'the webhook');
      await sleep(500);
      assert.equal(told('event.error').length, 1, JSON.stringify(told('event.error')));
      assert.match(
        String(told('event.error')[0]!.entry.summary),
        /^Hosted agent crashed: exited with code 3/,
      );
      assert.deepEqual(
        warnings().map((l) => l.msg),
        ['hosted agent failing: its process crashed'],
      );

      // Fixed: it runs, and after the error window without an error or a restart it recovered.
      await owner.stop(address);
      await owner.waitForAgent(address, (a) => a.state === 'stopped');
      await owner.setCode(address, { 'agent.py': 'import time\nwhile True:\n    time.sleep(1)\n' });
      await owner.start(address);
      await owner.waitForAgent(address, (a) => a.state === 'running');
      const total = crashesOf((await errorRows())[0]!);
      const hosting = server.server.ctx.services.hosting;
      assert.equal(await hosting.endQuietFailures(), 0, 'not yet quiet for 2 s');
      await sleep(2500);
      assert.equal(await hosting.endQuietFailures(), 1);
      const ended = await errorRows();
      assert.equal(ended.length, 1);
      assert.match(
        ended[0]!.summary,
        new RegExp(`\\(failed for \\d+ s: ${total} crashes; recovered\\)$`),
      );
      await waitFor(() => (told('agent.recovered').length > 0 ? true : undefined), 'recovered');
      await sleep(300);
      assert.equal(told('agent.recovered').length, 1);
      assert.equal(told('event.error').length, 1);
      assert.equal(warnings().length, 2, JSON.stringify(warnings()));
      assert.match(warnings()[1]!.msg, new RegExp(`after ${total} crashes over \\d+ s$`));
    });
  });
});
