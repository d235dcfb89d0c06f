import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Browser } from 'playwright-core';
import { loadConfig } from '../../src/config/index.js';
import type { HostedLogLine } from '../../src/services/hosting/index.js';
import { browserSkipReason, ensureWebBuild, launchBrowser, watchPage } from '../kit/browser.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { until } from '../kit/wait.js';

/**
 * A hosted agent's logs in the console: they open at the newest line and follow new ones,
 * and the level filter keeps the lines at a level and above, a traceback one entry.
 */

const TRACEBACK = [
  "ERROR:    [busy]: Exception in interval handler: 'x'",
  'Traceback (most recent call last):',
  '  File "/agent/agent.py", line 9, in tick',
  '    print(settings["x"])',
  "KeyError: 'x'",
].join('\n');

const LOOK = { timeoutMs: 10_000, everyMs: 50 };

describeOnEachDialect('web console: a hosted agent’s logs', (dialect) => {
  let t: TestServer;
  let browser: Browser;

  before(async () => {
    if (browserSkipReason) return;
    ensureWebBuild();
    const hosting = { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') };
    t = await startTestServer({ dialect, config: { hosting } });
    browser = await launchBrowser();
  });
  after(async () => {
    if (browserSkipReason) return;
    await browser.close();
    await t.close();
  });

  it(
    'opens at the newest line, follows new ones and filters by level',
    { skip: browserSkipReason ?? false },
    async () => {
      const key = await t.addUser(`logs-levels-${dialect}`);
      const made = await call(t.url, 'POST', '/v1/hosting/agents', {
        key,
        body: { name: 'busy' },
      });
      assert.equal(made.status, 200, made.text);
      const address = made.body.address as string;
      // This server runs no agents: the test writes the lines the runner would, more than
      // the list shows at once.
      const hosting = t.server.ctx.services.hosting;
      const start = Date.now() - 60_000;
      const lines: HostedLogLine[] = Array.from({ length: 80 }, (_, i) => ({
        time: new Date(start + i * 100),
        level: i % 20 === 5 ? 'warn' : 'info',
        type: 'execution',
        entry: i % 20 === 5 ? `WARNING:  [busy]: careful ${i}` : `INFO:     [busy]: line ${i}`,
      }));
      lines.push({
        time: new Date(start + 9000),
        level: 'erro',
        type: 'execution',
        entry: TRACEBACK,
        exception: "KeyError: 'x'",
      });
      lines.push({
        time: new Date(start + 9100),
        level: 'info',
        type: 'execution',
        entry: 'INFO:     [busy]: the newest line',
      });
      await hosting.appendLogs(address, lines);

      const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
      const page = await context.newPage();
      const problems = watchPage(page);
      await page.goto(`${t.url}/#/hosted/${address}`);
      await page.getByLabel('API key').fill(key);
      await page.getByRole('button', { name: 'Sign in' }).click();
      const logs = page.getByTestId('logs');
      await logs.getByText('the newest line').waitFor();

      const atEnd = () =>
        logs.evaluate(
          (list) =>
            list.scrollHeight > list.clientHeight &&
            list.scrollTop + list.clientHeight >= list.scrollHeight - 4,
        );
      assert.equal(await atEnd(), true, 'the list opens at its newest line');
      assert.equal(await logs.locator('li').count(), 82);

      // New lines while it shows its end: it follows them.
      await hosting.appendLogs(address, [
        { time: new Date(), level: 'info', type: 'execution', entry: 'INFO:     [busy]: later' },
      ]);
      await logs.getByText('INFO:     [busy]: later').waitFor();
      await until(() => atEnd(), 'the list to follow to its newest line', LOOK);

      const level = page.getByLabel('Log level');
      await level.selectOption('erro');
      await until(
        async () => (await logs.locator('li').count()) === 1,
        'the error line alone',
        LOOK,
      );
      const only = logs.locator('li.log-erro');
      assert.equal(await only.count(), 1);
      assert.equal(await only.locator('.entry').textContent(), TRACEBACK);

      await level.selectOption('warn');
      await until(
        async () => (await logs.locator('li').count()) === 5,
        'the five warnings and errors',
        LOOK,
      );
      assert.equal(await logs.locator('li.log-warn').count(), 4);
      assert.equal(await logs.locator('li.log-info').count(), 0);

      await level.selectOption('all');
      await until(async () => (await logs.locator('li').count()) === 83, 'all 83 lines', LOOK);
      assert.equal(await atEnd(), true, 'back at the newest line');
      assert.deepEqual(problems, []);
      await context.close();
    },
  );
});
