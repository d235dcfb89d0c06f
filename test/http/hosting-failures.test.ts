import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../src/config/index.js';
import type { TimelineEntry } from '../../src/wire/activity.js';
import { capturingLogger, WARN } from '../kit/captured-log.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { until } from '../kit/wait.js';

const TRACEBACK = (n: number) =>
  `Traceback (most recent call last):\n  File "agent.py", line 7, in tick\n    raise KeyError("missing-${n}")\nKeyError: 'missing-${n}'`;

/**
 * A hosted agent whose handler raises again and again is one failure (docs/hosting.md,
 * "Errors"): one timeline row updated in place, one warning and one webhook when it begins,
 * one of each when it has run the error window without an error.
 */
describeOnEachDialect('failures of hosted agents', (dialect) => {
  const clock = new ManualClock();
  const log = capturingLogger();
  let t: TestServer;

  before(async () => {
    t = await startTestServer({
      dialect,
      clock,
      logger: log.logger,
      config: {
        allowPrivateTargets: true,
        agentErrorSeconds: 60,
        hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
      },
    });
  });
  after(() => t.close());

  it('groups errors every 5 s into one failure, told once when it begins and once when it recovers', async () => {
    const created = await call(t.url, 'POST', '/v1/hosting/agents', {
      key: t.userKey,
      body: { name: 'Raiser' },
    });
    assert.equal(created.status, 200, created.text);
    const address = created.body.address as string;
    const hook = await call(t.url, 'POST', '/v2/webhooks', {
      key: t.userKey,
      body: {
        url: 'http://127.0.0.1:9/hook',
        kinds: ['event.error', 'agent.failing', 'agent.recovered'],
      },
    });
    assert.equal(hook.status, 201, hook.text);
    const hosting = t.server.ctx.services.hosting;
    await hosting.setState(address, 'running', null);

    const raise = async (n: number) => {
      await hosting.appendLogs(address, [
        {
          time: new Date(clock.now()),
          level: 'erro',
          type: 'execution',
          entry: TRACEBACK(n),
          exception: `KeyError: 'missing-${n}'`,
        },
      ]);
    };
    const errorsOf = async () => {
      const res = await call(t.url, 'GET', `/v2/agents/${address}/activity?kind=event`, {
        key: t.userKey,
      });
      assert.equal(res.status, 200, res.text);
      return res.body.entries as TimelineEntry[];
    };
    const told = async () => {
      const res = await call(t.url, 'GET', `/v2/webhooks/${hook.body.id}/deliveries`, {
        key: t.userKey,
      });
      assert.equal(res.status, 200, res.text);
      return (res.body as { kind: string }[]).map((d) => d.kind).sort();
    };
    const warnings = () => log.lines.filter((l) => l.level >= WARN && l.agent === address);

    // The handler raises every 5 seconds, twelve times over a minute.
    for (let n = 1; n <= 12; n++) {
      await raise(n);
      clock.advance(5000);
    }
    const during = await errorsOf();
    const errorRows = during.filter((e) => e.kind === 'event.error');
    assert.equal(errorRows.length, 1, JSON.stringify(during));
    assert.match(errorRows[0]!.summary, /KeyError: 'missing-12' \(failing: 12 errors so far\)/);
    const data = errorRows[0]!.data as Record<string, unknown>;
    assert.equal(data.errors, 12);
    assert.equal(data.exception, 'KeyError');
    assert.equal(data.error, "KeyError: 'missing-12'");
    assert.equal(
      data.last_error_at,
      new Date(clock.now() - 5000).toISOString().replace('Z', '000+00:00'),
    );
    await until(async () => (await told()).length >= 2, 'the failure webhooks', { everyMs: 20 });
    assert.deepEqual(await told(), ['agent.failing', 'event.error']);
    assert.equal(warnings().length, 1, JSON.stringify(warnings()));
    const status = await call(t.url, 'GET', `/v2/agents/${address}`, { key: t.userKey });
    assert.equal(status.body.status.status, 'failing');

    // Not yet quiet for the error window (60 s): still failing, nothing more told.
    clock.advance(30_000);
    assert.equal(await hosting.endQuietFailures(), 0);
    // A crash and restart meanwhile does not end it either: the crash is part of the failure.
    await hosting.setState(address, 'crashed', 'exit code 1');
    const crashed = (await errorsOf()).filter((e) => e.kind === 'event.error');
    assert.equal(crashed.length, 1, JSON.stringify(crashed));
    assert.equal(
      crashed[0]!.summary,
      'Hosted agent crashed: exit code 1 (failing: 12 errors and 1 crash so far)',
    );
    assert.equal((crashed[0]!.data as Record<string, unknown>).crashes, 1);
    await hosting.setState(address, 'running', null);
    clock.advance(40_000);
    assert.equal(await hosting.endQuietFailures(), 0, 'running for 40 s since its restart');

    // A minute running without an error: recovered, told once.
    clock.advance(25_000);
    assert.equal(await hosting.endQuietFailures(), 1);
    assert.equal(await hosting.endQuietFailures(), 0);
    const recovered = await errorsOf();
    const recovery = recovered.filter(
      (e) => e.kind === 'event.info' && e.summary.startsWith('recovered'),
    );
    assert.equal(recovery.length, 1, JSON.stringify(recovered));
    // The crash, 30 s after the last error, is the failure's last.
    assert.match(recovery[0]!.summary, /after 12 errors and 1 crash over 90 s/);
    const row = recovered.filter((e) => e.kind === 'event.error');
    assert.equal(row.length, 1, JSON.stringify(recovered));
    assert.match(row[0]!.summary, /failed for 90 s: 12 errors and 1 crash; recovered/);
    // Webhook deliveries are enqueued after the commit that records the recovery, not within it.
    await until(async () => (await told()).includes('agent.recovered'), 'the recovery webhook', {
      everyMs: 20,
    });
    assert.equal(
      (await told()).filter((k) => k === 'agent.recovered' || k === 'event.error').length,
      // One when it began, one when it recovered: the crash is part of it.
      2,
    );
    assert.equal(
      warnings().filter((l) => /hosted agent/.test(l.msg)).length,
      2,
      JSON.stringify(warnings()),
    );
    await t.server.ctx.services.activity.sweep();
    const after = await call(t.url, 'GET', `/v2/agents/${address}`, { key: t.userKey });
    assert.notEqual(after.body.status.status, 'failing');

    // It raises again: a new failure, a new row.
    await raise(13);
    const again = (await errorsOf()).filter(
      (e) => e.kind === 'event.error' && e.summary.includes('failing: 1 error so far'),
    );
    assert.equal(again.length, 1);
  });
});
