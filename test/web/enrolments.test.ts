import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { browserSkipReason, ensureWebBuild, launchBrowser, watchPage } from '../kit/browser.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';

describeOnEachDialect('provisioning agents and scoped keys in the console', (dialect) => {
  let t: TestServer;
  let browser: Browser;

  before(async () => {
    if (browserSkipReason) return;
    ensureWebBuild();
    t = await startTestServer({ dialect });
    browser = await launchBrowser();
  });
  after(async () => {
    if (browserSkipReason) return;
    await browser.close();
    await t.close();
  });

  async function openPage(url: string): Promise<{ page: Page; problems: string[] }> {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: t.url });
    const page = await context.newPage();
    const problems = watchPage(page);
    await page.goto(url);
    await page.getByLabel('API key').fill(t.userKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    return { page, problems };
  }

  const opts = { skip: browserSkipReason ?? false };

  it(
    'provisions an agent, shows its Agent URI once with a copy, and the agent registers itself',
    opts,
    async () => {
      const { page, problems } = await openPage(`${t.url}/#/agents`);
      const card = page.getByTestId('provision');
      await card.getByLabel('Agent name').fill('Console Bridge');
      await card.getByRole('button', { name: 'Provision agent' }).click();
      const uri = (await card.getByTestId('agent-uri').textContent())!;
      const match =
        /^http:\/\/([a-z0-9-]+):([0-9a-f]{64})@127\.0\.0\.1:\d+\/Console%20Bridge$/.exec(uri);
      assert.ok(match, uri);
      await card.getByRole('button', { name: 'Copy' }).click();
      await card.getByRole('button', { name: 'Copied' }).waitFor();
      assert.equal(await page.evaluate('navigator.clipboard.readText()'), uri);
      const identity = TestIdentity.fromSeed(match[2]!, 0);
      await card.getByTestId('enrolments').getByText(identity.address).waitFor();

      // The agent started from it registers itself, and shows in the list.
      const registered = await call(t.url, 'POST', '/v2/agents', {
        authorization: identity.authorization(),
        body: {
          address: identity.address,
          name: 'Console Bridge',
          handle: match[1],
          agent_type: 'a2a',
        },
      });
      assert.equal(registered.status, 200, registered.text);
      await page.reload();
      await page.getByRole('link', { name: 'Console Bridge' }).waitFor();
      // Shown once: the key is not on the page any more.
      assert.ok(!(await page.content()).includes(match[2]!));

      // Ending the enrolment stops the agent registering itself.
      await page.getByTestId('enrolments').getByRole('button', { name: 'End enrolment' }).click();
      await page.getByTestId('enrolments').waitFor({ state: 'detached' });
      const refused = await call(t.url, 'POST', '/v2/agents', {
        authorization: identity.authorization(),
        body: { address: identity.address, name: 'Console Bridge' },
      });
      assert.equal(refused.status, 403, refused.text);
      assert.deepEqual(problems, []);
    },
  );

  it('creates a read-only key limited to one agent and lists its scope', opts, async () => {
    const agent = TestIdentity.random().address;
    const { page, problems } = await openPage(`${t.url}/#/keys`);
    await page.getByLabel('Label').fill('dashboard');
    await page.getByLabel('Read only').check();
    await page.getByLabel('Only these agents').fill(agent);
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = (await page.getByTestId('new-key').textContent())!;
    const row = page.getByTestId('keys').getByRole('row').filter({ hasText: 'dashboard' });
    assert.equal(await row.locator('.scope').textContent(), `read-only, agent ${agent}`);
    const full = page.getByTestId('keys').getByRole('row').filter({ hasText: 'this session' });
    assert.equal(await full.locator('.scope').textContent(), 'full');
    const write = await call(t.url, 'DELETE', `/v2/agents/${agent}`, { key });
    assert.equal(write.status, 403, write.text);
    assert.match(write.body.detail, /read-only/);
    // A mistyped address is refused with the field named.
    await page.getByLabel('Only these agents').fill('agent1typo');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page
      .getByText(/addresses/)
      .first()
      .waitFor();
    assert.deepEqual(problems, []);
  });
});
