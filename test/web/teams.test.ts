import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { browserSkipReason, ensureWebBuild, launchBrowser, watchPage } from '../kit/browser.js';
import { newRegisteredAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { LocalAgent } from '../kit/local-agent.js';
import { startTestServer, type TestServer } from '../kit/server.js';

describeOnEachDialect('web console: teams and the team switcher', (dialect) => {
  let t: TestServer;
  let browser: Browser;
  let mike: string;

  before(async () => {
    if (browserSkipReason) return;
    ensureWebBuild();
    t = await startTestServer({ dialect });
    browser = await launchBrowser();
    mike = await t.addUser('mike');
  });
  after(async () => {
    if (browserSkipReason) return;
    await browser.close();
    await t.close();
  });

  async function openPage(url: string, key: string): Promise<{ page: Page; problems: string[] }> {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    const problems = watchPage(page);
    await page.goto(url);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    return { page, problems };
  }

  const agentsTable = (page: Page) => page.getByTestId('agents');

  const opts = { skip: browserSkipReason ?? false };

  it(
    'creates a team, adds a member, and switches the pages between personal and team agents',
    opts,
    async () => {
      const { page, problems } = await openPage(`${t.url}/#/teams`, t.userKey);
      await page.getByLabel('Team slug').fill('acme');
      await page.getByLabel('Team name').fill('Acme Robotics');
      await page.getByRole('button', { name: 'Create team' }).click();
      const members = page.getByTestId('members');
      await members.getByText('Acme Robotics').waitFor();
      await page.getByLabel('User to add').fill('mike');
      await page.getByRole('button', { name: 'Add member' }).click();
      await members.locator('[data-member="mike"]').waitFor();
      const shown = await call(t.url, 'GET', '/v2/teams/acme', { key: mike });
      assert.equal(shown.status, 200, shown.text);
      assert.deepEqual(
        shown.body.members.map((m: { user: string; role: string }) => [m.user, m.role]),
        [
          ['admin', 'owner'],
          ['mike', 'member'],
        ],
      );

      const personal = await newRegisteredAgent({ url: t.url }, t.userKey);
      const teams = await newRegisteredAgent({ url: t.url }, mike, {
        headers: { 'x-team': 'acme' },
      });
      await page.goto(`${t.url}/#/agents`);
      await agentsTable(page).getByText(personal.address).waitFor();
      assert.equal(await agentsTable(page).getByText(teams.address).count(), 0);

      // The switcher lists the team once it is made; choosing it shows the team's agents.
      await page.getByLabel('Acting as').selectOption('acme');
      await agentsTable(page).getByText(teams.address).waitFor();
      assert.equal(await agentsTable(page).getByText(personal.address).count(), 0);
      // It stays chosen across a reload, and keys made now are the team's.
      await page.reload();
      await agentsTable(page).getByText(teams.address).waitFor();
      await page.goto(`${t.url}/#/keys`);
      await page.getByLabel('Label').fill('team deploy');
      await page.getByRole('button', { name: 'Create key' }).click();
      const key = (await page.getByTestId('new-key').textContent())!;
      const listed = await call(t.url, 'GET', '/v2/agents', { key });
      assert.deepEqual(
        listed.body.map((a: { address: string }) => a.address),
        [teams.address],
      );
      // The live timeline of a team agent streams in the team's name too.
      await page.goto(`${t.url}/#/agents/${teams.address}/activity`);
      await page.getByTestId('live').getByText('Live').waitFor();

      // The inspector connects an agent for the team chosen in the console.
      const local = await new LocalAgent({ agentry: t.url, name: 'team bot' }).start();
      try {
        await page.goto(local.inspectorLink());
        await page.getByTestId('team').getByText('acme').waitFor();
        await page.getByText('Not registered with Agentry under team acme').waitFor();
        await page.getByRole('button', { name: 'Connect', exact: true }).click();
        await page.getByText('Connected: the agent is registered').waitFor();
      } finally {
        await local.close();
      }
      const asMike = await call(t.url, 'GET', '/v2/agents', {
        key: mike,
        headers: { 'x-team': 'acme' },
      });
      assert.ok(asMike.text.includes(local.address), asMike.text);
      for (const key of [mike, t.userKey]) {
        const own = await call(t.url, 'GET', '/v2/agents', { key });
        assert.ok(!own.text.includes(local.address), own.text);
      }

      await page.goto(`${t.url}/#/agents`);
      await page.getByLabel('Acting as').selectOption('');
      await agentsTable(page).getByText(personal.address).waitFor();
      assert.equal(await agentsTable(page).getByText(teams.address).count(), 0);
      assert.deepEqual(problems, []);
    },
  );

  it('goes back to the personal view when the member is removed from the team', opts, async () => {
    const { page, problems } = await openPage(`${t.url}/#/agents`, mike);
    await page.getByLabel('Acting as').selectOption('acme');
    await agentsTable(page).waitFor();
    const removed = await call(t.url, 'DELETE', '/v2/teams/acme/members/mike', {
      key: t.userKey,
    });
    assert.equal(removed.status, 200, removed.text);
    await page.reload();
    await page
      .getByRole('alert')
      .getByText(/Not a member of a team "acme"/)
      .waitFor();
    assert.equal(await page.getByLabel('Acting as').inputValue(), '');
    assert.deepEqual(
      problems.filter((p) => !p.includes('403')),
      [],
    );
  });
});
