import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { loadConfig } from '../../src/config/index.js';
import { CHAT_PROTOCOL_DIGEST } from '../../src/wire/chat.js';
import { a2aClient, sendText, textOfMessage } from '../kit/a2a.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { browserSkipReason, ensureWebBuild, launchBrowser, watchPage } from '../kit/browser.js';
import { startChatAgent } from '../kit/chat-agent.js';
import { startSampleA2aAgent } from '../kit/a2a-sample-agent.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';

/**
 * The console's A2A panel (docs/a2a.md): the owner serves a chat agent over A2A from its page,
 * and an A2A client then finds it by the card's address the page shows.
 */
describeOnEachDialect('serving an agent over A2A from the console', (dialect) => {
  let t: TestServer;
  let browser: Browser;
  let echo: Awaited<ReturnType<typeof startChatAgent>>;

  before(async () => {
    if (browserSkipReason) return;
    ensureWebBuild();
    t = await startTestServer({
      dialect,
      config: {
        allowPrivateTargets: true,
        hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
      },
    });
    echo = await startChatAgent(
      hostOf(t),
      t.userKey,
      { kind: 'echo', prefix: 'echo: ' },
      { name: 'echo desk', protocols: [CHAT_PROTOCOL_DIGEST] },
    );
    browser = await launchBrowser();
  });
  after(async () => {
    if (browserSkipReason) return;
    await browser?.close();
    await echo?.close();
    await t?.close();
  });

  async function agentPage(address: string): Promise<{ page: Page; problems: string[] }> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const problems = watchPage(page);
    await page.goto(`${t.url}/#/agents/${address}`);
    await page.getByLabel('API key').fill(t.userKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByTestId('a2a').waitFor();
    return { page, problems };
  }

  const opts = { skip: browserSkipReason ?? false };

  it('serves a chat agent publicly, shows its card’s address, and stops', opts, async () => {
    const { page, problems } = await agentPage(echo.address);
    const panel = page.getByTestId('a2a');
    assert.equal(await panel.getByLabel('Served').inputValue(), 'off');
    await panel.getByLabel('Served').selectOption('public');
    await panel.getByRole('button', { name: 'Save A2A setting' }).click();
    const card = panel.getByTestId('a2a-card');
    await card.getByText(`${t.url}/a2a/${echo.address}/.well-known/agent-card.json`).waitFor();
    // An A2A client given that address, without a key, finds the agent and is answered.
    const client = await a2aClient(`${t.url}/a2a/${echo.address}`);
    assert.equal((await client.getAgentCard()).name, 'echo desk');
    const task = await sendText(client, 'from the console');
    assert.equal(textOfMessage(task.status?.message), 'echo: from the console');

    await panel.getByLabel('Served').selectOption('off');
    await panel.getByRole('button', { name: 'Save A2A setting' }).click();
    await card.waitFor({ state: 'detached' });
    const gone = await call(t.url, 'GET', `/a2a/${echo.address}/.well-known/agent-card.json`);
    assert.equal(gone.status, 404);
    assert.deepEqual(problems, []);
  });

  it('says why an agent that does not speak the chat protocol cannot be served', opts, async () => {
    const plain = await newRegisteredAgent(hostOf(t), t.userKey);
    const { page, problems } = await agentPage(plain.address);
    const panel = page.getByTestId('a2a');
    await panel.getByLabel('Served').selectOption('private');
    await panel.getByRole('button', { name: 'Save A2A setting' }).click();
    await panel
      .locator('.error')
      .getByText(/does not speak the chat protocol/)
      .waitFor();
    assert.deepEqual(
      problems.filter((p) => !p.includes('409')),
      [],
    );
  });

  it('adds an external A2A agent by its card’s URL, and shows its skills', opts, async () => {
    const external = await startSampleA2aAgent({ name: 'Haiku desk' });
    try {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      const problems = watchPage(page);
      await page.goto(`${t.url}/#/agents`);
      await page.getByLabel('API key').fill(t.userKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('button', { name: 'Add an A2A agent…' }).click();
      const form = page.getByTestId('add-a2a-agent');
      // A URL that is no card is refused, in the server's words, and nothing is added.
      await form.getByLabel('Agent card URL').fill(`${external.url}/nothing-here.json`);
      await form.getByRole('button', { name: 'Add' }).click();
      await form
        .locator('.error')
        .getByText(/could not be read/)
        .waitFor();
      await form.getByLabel('Agent card URL').fill(external.cardUrl);
      await form.getByRole('button', { name: 'Add' }).click();
      await page.getByTestId('agent-name').getByText('Haiku desk').waitFor();
      await page.getByTestId('readme').getByText('Haiku writing').waitFor();
      const address = decodeURIComponent(new URL(page.url()).hash.split('/')[2]!);
      const listed = await call(t.url, 'GET', `/v2/a2a/external-agents/${address}`, {
        key: t.userKey,
      });
      assert.equal(listed.status, 200, listed.text);
      assert.equal(listed.body.card_url, external.cardUrl);
      assert.deepEqual(
        problems.filter((p) => !p.includes('422')),
        [],
      );
    } finally {
      await external.close();
    }
  });
});
