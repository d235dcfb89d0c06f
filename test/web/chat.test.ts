import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { loadConfig } from '../../src/config/index.js';
import { browserSkipReason, ensureWebBuild, launchBrowser, watchPage } from '../kit/browser.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { startChatAgent } from '../kit/chat-agent.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { startEndpoint } from '../kit/loopback.js';
import { startTestServer, type TestServer } from '../kit/server.js';

type ChatAgent = Awaited<ReturnType<typeof startChatAgent>>;

/** Waits until the page's screen-reader announcer has said `text`. */
async function announced(page: Page, text: string): Promise<void> {
  await page
    .getByTestId('announcer')
    .filter({ hasText: text })
    .waitFor({ state: 'attached', timeout: 5000 });
}

describeOnEachDialect('chat with agents in the console', (dialect) => {
  let t: TestServer;
  let browser: Browser;
  let echo: ChatAgent;
  let storyteller: ChatAgent;
  const closers: (() => Promise<void>)[] = [];

  before(async () => {
    if (browserSkipReason) return;
    ensureWebBuild();
    t = await startTestServer({
      dialect,
      config: {
        // The scripted agents listen on loopback, where their proxy forwards.
        allowPrivateTargets: true,
        // Replicas share no key file: on PostgreSQL the operator names the sealing key.
        hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
      },
    });
    echo = await startChatAgent(hostOf(t), t.userKey, { kind: 'echo', prefix: 'echo: ' });
    storyteller = await startChatAgent(hostOf(t), t.userKey, {
      kind: 'stream',
      chunks: ['Once ', 'upon ', 'a time'],
    });
    browser = await launchBrowser();
  });
  after(async () => {
    if (browserSkipReason) return;
    await browser?.close();
    await echo?.close();
    await storyteller?.close();
    for (const close of closers) await close();
    await t?.close();
  });

  /** A fresh browser profile signed in with `key`, on `hash` of the console. */
  async function openConsole(
    key: string,
    hash: string,
  ): Promise<{ page: Page; problems: string[] }> {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    const problems = watchPage(page);
    await page.goto(`${t.url}/${hash}`);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    return { page, problems };
  }

  /** Types `text` in the message box and presses Send. */
  async function say(page: Page, text: string): Promise<void> {
    await page.getByLabel(/^Message to /).fill(text);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
  }

  const sessionsWith = async (agent: string) =>
    (await call(t.url, 'GET', `/v2/chat/sessions?agent=${agent}`, { key: t.userKey })).body as {
      id: string;
      ended_at: string | null;
    }[];

  const opts = { skip: browserSkipReason ?? false };

  it(
    'says hello from the Chat tab: the message is received and the reply arrives live',
    opts,
    async () => {
      const { page, problems } = await openConsole(t.userKey, '#/agents');
      await page.getByRole('link', { name: `agent ${echo.address.slice(-8)}` }).click();
      const tabs = page.getByRole('navigation', { name: 'Agent pages' });
      await tabs.getByRole('link', { name: 'Chat' }).click();
      // The tab is marked once the page has moved to it, not at the click.
      await page.getByText('A new session: your first message opens it.').waitFor();
      await tabs.locator('a[aria-current="page"]', { hasText: 'Chat' }).waitFor({ timeout: 5000 });
      assert.equal(await page.title(), 'Chat with agent · Agentry');
      assert.deepEqual(await sessionsWith(echo.address), [], 'no session until something is said');

      await say(page, 'hello');
      const conversation = page.getByTestId('conversation');
      const mine = conversation.locator('li[data-from="you"]');
      await mine.getByText('hello', { exact: true }).waitFor();
      await mine.getByTestId('delivery').filter({ hasText: '✓ received' }).waitFor();
      const replies = conversation.locator('li[data-from="agent"]');
      await replies.getByText('echo: hello', { exact: true }).waitFor();
      await announced(page, 'echo: hello');
      await page.getByTestId('live').filter({ hasText: 'Live' }).waitFor();
      // The box is emptied and keeps the focus, for the next message.
      assert.equal(await page.getByLabel(/^Message to /).inputValue(), '');
      assert.equal(await page.evaluate('document.activeElement?.id'), 'chat-text');
      const [session] = await sessionsWith(echo.address);
      assert.ok(session);

      // Back later, the same session goes on, with what was said in it.
      await page.reload();
      await conversation.locator('li[data-from="agent"]').getByText('echo: hello').waitFor();
      await mine.getByTestId('delivery').filter({ hasText: '✓ received' }).waitFor();
      await page.getByLabel(/^Message to /).fill('again');
      await page.getByLabel(/^Message to /).press('Enter');
      await replies.getByText('echo: again', { exact: true }).waitFor();
      assert.equal(await replies.count(), 2);
      assert.equal((await sessionsWith(echo.address)).length, 1);

      // Ended, the session is read alone; a new one can be started.
      await page.getByRole('button', { name: 'End session' }).click();
      await conversation.getByText('You ended the session.').waitFor();
      await page.getByTestId('send-disabled').getByText('This session has ended').waitFor();
      assert.ok(await page.getByLabel(/^Message to /).isDisabled());
      assert.ok(await page.getByRole('button', { name: 'Send', exact: true }).isDisabled());
      assert.notEqual((await sessionsWith(echo.address))[0]!.ended_at, null);
      await page.getByRole('button', { name: 'New session' }).click();
      await page.getByText('A new session: your first message opens it.').waitFor();
      assert.ok(await page.getByLabel(/^Message to /).isEnabled());
      assert.equal(await conversation.count(), 0);

      // The Chat page lists the sessions; each leads back to its conversation.
      await page.locator('header nav').getByRole('link', { name: 'Chat' }).click();
      const list = page.getByTestId('chat-sessions');
      const row = list.locator(`tr[data-session="${session.id}"]`);
      await row.getByText(/^ended/).waitFor();
      await row.getByRole('link', { name: `agent ${echo.address.slice(-8)}` }).click();
      await conversation.getByText('echo: again', { exact: true }).waitFor();
      assert.ok(page.url().endsWith(`/chat/${session.id}`), page.url());
      await page.getByTestId('send-disabled').waitFor();
      assert.deepEqual(problems, []);
    },
  );

  it('assembles a streamed reply into one message', opts, async () => {
    const { page, problems } = await openConsole(t.userKey, `#/agents/${storyteller.address}/chat`);
    await say(page, 'a story');
    const replies = page.getByTestId('conversation').locator('li[data-from="agent"]');
    await replies.getByText('Once upon a time', { exact: true }).waitFor();
    await page
      .getByTestId('conversation')
      .locator('li[aria-busy="true"]')
      .waitFor({ state: 'detached' });
    assert.equal(await replies.count(), 1, 'the chunks are one message');
    await announced(page, 'Once upon a time');
    await page
      .locator('li[data-from="you"]')
      .getByTestId('delivery')
      .filter({ hasText: '✓ received' })
      .waitFor();
    assert.deepEqual(problems, []);
  });

  it('says in words why a message was not delivered', opts, async () => {
    // An agent whose proxy URL answers 503, and whose proxy keeps nothing it cannot forward.
    const endpoint = await startEndpoint();
    closers.push(endpoint.close);
    const down = await newRegisteredAgent(hostOf(t), t.userKey, {
      redirectUrl: `${endpoint.url}/fail`,
      listing: { name: 'down', keep_failed_forwards: false },
    });
    const { page, problems } = await openConsole(t.userKey, `#/agents/${down.address}/chat`);
    await say(page, 'anyone there?');
    const mine = page.getByTestId('conversation').locator('li[data-from="you"]');
    await mine.getByText('anyone there?').waitFor();
    const delivery = mine.getByTestId('delivery');
    await delivery.getByText('Not delivered: Target agent answered with status 503').waitFor();
    assert.match((await mine.getAttribute('class')) ?? '', /failed/);
    await announced(page, 'Not delivered: Target agent answered with status 503');
    // The failure is kept: it reads the same once the page is opened again.
    await page.reload();
    await delivery.getByText('Not delivered: Target agent answered with status 503').waitFor();
    assert.deepEqual(problems, []);
  });

  it(
    'chats with an agent of someone else, reached here, without its owner’s tabs',
    opts,
    async () => {
      const other = await t.addUser(`chatter-${dialect}`);
      const { page, problems } = await openConsole(other, `#/agents/${echo.address}/chat`);
      await page.getByRole('heading', { name: `Chat with ${echo.address}` }).waitFor();
      assert.equal(await page.getByRole('navigation', { name: 'Agent pages' }).count(), 0);
      await say(page, 'hi from elsewhere');
      await page
        .getByTestId('conversation')
        .getByText('echo: hi from elsewhere', { exact: true })
        .waitFor();
      assert.deepEqual(problems, []);
    },
  );

  it(
    'turns the send box off, saying why, when the server refuses to send (403)',
    opts,
    async () => {
      // A console session is never read-only (a scoped key cannot open one), so the refusal
      // a read-only key gets is answered here in the server's words.
      const detail =
        'This API key is read-only: it may only read (GET). Use a key without read_only for this call';
      const { page, problems } = await openConsole(t.userKey, `#/agents/${echo.address}/chat`);
      await page.route('**/v2/chat/sessions/*/messages', (route) =>
        route.request().method() === 'POST'
          ? route.fulfill({
              status: 403,
              contentType: 'application/json',
              body: JSON.stringify({ detail }),
            })
          : route.continue(),
      );
      await say(page, 'may I?');
      await page
        .getByTestId('send-disabled')
        .getByText(`You can read this session but not send in it: ${detail}`)
        .waitFor();
      assert.ok(await page.getByLabel(/^Message to /).isDisabled());
      // What was typed is kept.
      assert.equal(await page.getByLabel(/^Message to /).inputValue(), 'may I?');
      assert.deepEqual(
        problems.filter((p) => !p.includes('403')),
        [],
      );
    },
  );
});
