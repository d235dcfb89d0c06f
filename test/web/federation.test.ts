import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Browser } from 'playwright-core';
import { loadConfig } from '../../src/config/index.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { browserSkipReason, ensureWebBuild, launchBrowser, watchPage } from '../kit/browser.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';

/**
 * The console's Federation panel and page (docs/federation.md): the owner publishes an agent
 * from its page and sees where; the page shows the instance and its upstreams' health.
 */
describeOnEachDialect('federation in the console', (dialect) => {
  let t: TestServer;
  let browser: Browser;
  /** Nobody listens there: the upstream is down. */
  const upstream = 'http://127.0.0.1:1';

  before(async () => {
    if (browserSkipReason) return;
    ensureWebBuild();
    t = await startTestServer({
      dialect,
      config: {
        hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
        federation: { peers: [], upstreams: [upstream], timeoutMs: 500, cacheSeconds: 5 },
      },
    });
    browser = await launchBrowser();
  });
  after(async () => {
    if (browserSkipReason) return;
    await browser?.close();
    await t?.close();
  });

  const opts = { skip: browserSkipReason ?? false };

  it(
    'publishes an agent from its page, shows where, and shows the upstream unhealthy',
    opts,
    async () => {
      const agent = await newRegisteredAgent(hostOf(t), t.userKey);
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      const problems = watchPage(page);
      await page.goto(`${t.url}/#/agents/${agent.address}`);
      await page.getByLabel('API key').fill(t.userKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      const panel = page.getByTestId('federation');
      await panel.getByText('Not published').waitFor();
      await panel.getByRole('button', { name: 'Publish' }).click();
      await panel.getByTestId('federation-upstreams').getByText(upstream).waitFor();
      const setting = await call(t.url, 'GET', `/v2/agents/${agent.address}/federation`, {
        key: t.userKey,
      });
      assert.equal(setting.body.published, true);

      // A look-up that reaches the upstream marks it unhealthy, with the reason.
      const unknown = await call(
        t.url,
        'GET',
        `/v1/almanac/agents/${TestIdentity.random().address}`,
      );
      assert.equal(unknown.status, 404, unknown.text);
      await page.goto(`${t.url}/#/federation`);
      const status = page.getByTestId('federation-status');
      await status.getByText(upstream).waitFor();
      await status.getByText(/Unhealthy: could not be reached/).waitFor();
      assert.deepEqual(problems, []);
      await context.close();
    },
  );
});
