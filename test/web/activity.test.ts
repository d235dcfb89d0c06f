import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { browserSkipReason, ensureWebBuild, launchBrowser, watchPage } from '../kit/browser.js';
import { hostOf, newRegisteredAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { flushPresence, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { until } from '../kit/wait.js';

const TRACEBACK =
  'Traceback (most recent call last):\n  File "agent.py", line 12, in handler\n    1 / 0\nZeroDivisionError: division by zero\n';

describeOnEachDialect('what agents are doing, in the console', (dialect) => {
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

  /** A fresh browser profile signed in with `key`, on `hash` of the console. */
  async function openConsole(key: string, hash = ''): Promise<{ page: Page; problems: string[] }> {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    const problems = watchPage(page);
    await page.goto(`${t.url}/${hash}`);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    return { page, problems };
  }

  async function submit(to: string, kind: 'mailbox' | 'proxy' = 'mailbox') {
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: to, payloadJson: '{"text":"hi"}' }),
    );
    return call(t.url, 'POST', `/v2/agents/${kind}/submit`, { body: envelope });
  }

  async function reportError(agent: TestIdentity): Promise<void> {
    const res = await call(t.url, 'POST', '/v1/events', {
      authorization: agent.authorization(Date.now()),
      body: {
        events: [
          {
            id: randomUUID(),
            category: 'user',
            kind: 'error',
            timestamp: new Date().toISOString(),
            message: 'division by zero',
            exception: 'ZeroDivisionError',
            traceback: TRACEBACK,
          },
        ],
      },
    });
    assert.equal(res.status, 200, res.text);
  }

  const opts = { skip: browserSkipReason ?? false };

  it(
    'lists each agent with its status and when it was last seen, failing ones first and counted',
    opts,
    async () => {
      const key = await t.addUser(`statuses-${dialect}`);
      await newRegisteredAgent(hostOf(t), key, { listing: { name: 'quiet' } });
      const busy = await newRegisteredAgent(hostOf(t), key, { listing: { name: 'busy' } });
      // A proxy whose URL is on this machine: the proxy refuses to forward there.
      const blocked = await newRegisteredAgent(hostOf(t), key, {
        listing: { name: 'blocked' },
        redirectUrl: 'http://127.0.0.1:9/submit',
      });
      // Handed a message, the agent works: active.
      assert.equal((await submit(busy.address)).status, 200);
      const polled = await call(t.url, 'GET', `/v2/agents/${busy.address}/mailbox`, {
        authorization: busy.authorization(Date.now()),
      });
      assert.equal(polled.status, 200, polled.text);
      assert.equal((polled.body as unknown[]).length, 1);
      await flushPresence(t);
      // The proxy keeps the message (200) and says why the forward failed.
      assert.equal((await submit(blocked.address, 'proxy')).status, 200);
      await until(
        async () => {
          const res = await call(t.url, 'GET', `/v2/agents/${blocked.address}`, { key });
          return res.body.status.status === 'failing';
        },
        'the blocked agent to be failing',
        { everyMs: 50 },
      );

      const { page, problems } = await openConsole(key);
      const table = page.getByTestId('agents');
      await table.waitFor();
      await page.getByRole('heading', { name: /Agents\s+1 failing/ }).waitFor();
      const rows = table.getByRole('row');
      // The header, then the failing agent first, whatever the API's order.
      await rows.nth(1).getByRole('link', { name: 'blocked' }).waitFor();
      const failing = rows.filter({ hasText: 'blocked' });
      assert.equal(await failing.locator('[data-status]').textContent(), '✖ failing');
      await failing.getByText(/forward failed: private address refused/).waitFor();
      const active = rows.filter({ hasText: 'busy' });
      assert.equal(await active.locator('[data-status]').textContent(), '● active');
      const seen = active.locator('time');
      assert.equal(await seen.textContent(), 'just now');
      // The exact moment on hover.
      const title = (await seen.getAttribute('title')) ?? '';
      assert.ok(title.length > 8, title);
      const never = rows.filter({ hasText: 'quiet' });
      assert.equal(await never.locator('[data-status]').textContent(), '○ offline');
      await never.getByText('never', { exact: true }).waitFor();
      assert.equal(await page.locator(`[data-status]`).count(), 3);

      // The failing agent's activity says why, plainly.
      await failing.getByRole('link', { name: 'Activity' }).click();
      await page.getByRole('heading', { name: 'Activity of blocked' }).waitFor();
      // The kept message is forwarded again later: one entry stands for the outage, with how
      // many messages it held back, and no entry per failed attempt.
      const entry = page.locator('li[data-kind="forwards.failing"]');
      await entry.getByText(/Failure:/).waitFor();
      await entry.getByText(/private address refused: 127\.0\.0\.1/).waitFor();
      const outage = entry.getByTestId('outage');
      await outage.getByText('Messages not forwarded').waitFor();
      assert.equal(await outage.locator('dd').first().textContent(), '1');
      await outage.getByText('not yet').waitFor();
      assert.equal(await entry.count(), 1);
      assert.equal(await page.locator('li[data-kind="message.forward_failed"]').count(), 0);
      // The kept message is one entry; its steps open under it.
      const message = page.locator('li[data-kind="message.stored"]');
      assert.equal(await message.count(), 1);
      await message.getByRole('button', { name: 'Steps' }).click();
      const steps = message.getByTestId('trace');
      await steps
        .getByText(/forwarded .*\(private address refused: 127\.0\.0\.1/)
        .first()
        .waitFor();
      await steps.getByText(/stored \(kept after a failed forward\)/).waitFor();
      // A proxy agent has its forward latency charted too.
      await page.getByText('No forward was answered in the last 48 hours.').waitFor();
      assert.deepEqual(problems, []);
    },
  );

  it(
    'shows the timeline, filters it, expands a traceback, charts messages and follows it live',
    opts,
    async () => {
      const key = await t.addUser(`timeline-${dialect}`);
      const agent = await newRegisteredAgent(hostOf(t), key, { listing: { name: 'worker' } });
      for (let i = 0; i < 3; i++) assert.equal((await submit(agent.address)).status, 200);
      await reportError(agent);

      const { page, problems } = await openConsole(key, '#/agents');
      await page.getByRole('link', { name: 'worker' }).click();
      await page
        .getByRole('navigation', { name: 'Agent pages' })
        .getByRole('link', { name: 'Activity' })
        .click();
      const timeline = page.getByTestId('timeline');
      const entries = timeline.getByRole('listitem');
      await timeline.locator('li[data-kind="event.error"]').waitFor();
      assert.equal(await timeline.locator('li[data-kind="message.stored"]').count(), 3);

      // The chart: the three messages, in the current hour's bar.
      const chart = page.getByRole('img', {
        name: /^Messages per hour over the last 48 hours: 3 stored, 0 forwarded/,
      });
      await chart.waitFor();
      assert.equal(await chart.locator('rect.stored').count(), 1);
      assert.match(
        (await chart.locator('g', { has: page.locator('rect') }).textContent()) ?? '',
        /3 stored/,
      );
      await page.getByLabel('Per day, the last 30 days').check();
      await page
        .getByRole('img', { name: /^Messages per day over the last 30 days: 3 stored/ })
        .waitFor();

      // The traceback, folded, opens from the keyboard.
      const error = timeline.locator('li[data-kind="event.error"]');
      assert.equal(await error.getByText('ZeroDivisionError: division by zero').isVisible(), false);
      await error.getByText('Traceback (ZeroDivisionError)').focus();
      await page.keyboard.press('Enter');
      await error.getByText(/ZeroDivisionError: division by zero/).waitFor();
      assert.match((await error.locator('pre').textContent()) ?? '', /File "agent\.py", line 12/);

      // Filters: failures alone, then everything again.
      await page.getByLabel('Kinds').selectOption({ label: 'Failures' });
      await timeline
        .locator('li[data-kind="message.stored"]')
        .first()
        .waitFor({ state: 'detached' });
      // The filtered page replaces the list: its entry is there once it has been read.
      await timeline.locator('li[data-kind="event.error"]').waitFor();
      assert.deepEqual(await kinds(page), ['event.error']);
      await page.getByLabel('Time', { exact: true }).selectOption({ label: 'Last hour' });
      await page.getByLabel('Kinds').selectOption({ label: 'Messages' });
      await timeline.locator('li[data-kind="message.stored"]').nth(2).waitFor();
      assert.ok((await kinds(page)).every((k) => k.startsWith('message.')));

      // Live: a message submitted through the API appears at the top, and is announced.
      const live = page.getByTestId('live');
      await live.getByText('Live').waitFor();
      assert.equal((await submit(agent.address)).status, 200);
      await timeline.locator('li[data-kind="message.stored"]').nth(3).waitFor();
      assert.equal(await entries.first().getAttribute('data-kind'), 'message.stored');
      assert.match((await page.getByTestId('announcer').textContent()) ?? '', /^New: message from/);

      // The server ends its streams (a restart): the page says so, reconnects, and goes on.
      t.server.ctx.services.activity.endStreams();
      await live.getByText('Reconnecting…').waitFor();
      await live.getByText('Live').waitFor();
      assert.equal((await submit(agent.address)).status, 200);
      await timeline.locator('li[data-kind="message.stored"]').nth(4).waitFor();
      assert.equal(await timeline.locator('li[data-kind="message.stored"]').count(), 5);
      assert.deepEqual(problems, []);
    },
  );

  it(
    'counts a message that expired unread as a failure, in the filter and the chart, naming its sender',
    opts,
    async () => {
      const key = await t.addUser(`expired-${dialect}`);
      const agent = await newRegisteredAgent(hostOf(t), key, { listing: { name: 'absent' } });
      const sender = TestIdentity.random();
      const envelope = sender.signEnvelope(
        makeEnvelope({
          sender: sender.address,
          target: agent.address,
          payloadJson: '{"text":"anyone?"}',
          expires: Math.floor(Date.now() / 1000) + 2,
        }),
      );
      const sent = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
      assert.equal(sent.status, 200, sent.text);
      assert.equal((await submit(agent.address)).status, 200);
      await new Promise((resolve) => setTimeout(resolve, 3100));
      assert.ok((await t.server.ctx.services.mailbox.sweepExpired()) >= 1);

      const { page, problems } = await openConsole(key, `#/agents/${agent.address}/activity`);
      const timeline = page.getByTestId('timeline');
      await timeline.locator('li[data-kind="message.expired"]').waitFor();
      await page.getByRole('img', { name: /: 2 stored, .*, 1 expired unread$/ }).waitFor();
      await page.getByLabel('Kinds').selectOption({ label: 'Failures' });
      await timeline
        .locator('li[data-kind="message.stored"]')
        .first()
        .waitFor({ state: 'detached' });
      // The filtered page replaces the list: its entry is there once it has been read.
      await timeline.locator('li[data-kind="message.expired"]').waitFor();
      assert.deepEqual(await kinds(page), ['message.expired']);
      const expired = timeline.locator('li[data-kind="message.expired"]');
      await expired.getByText(/Failure:/).waitFor();
      await expired
        .getByText(
          `message from ${sender.address.slice(0, 12)}…${sender.address.slice(-6)} expired unread`,
        )
        .waitFor();
      assert.deepEqual(problems, []);
    },
  );

  it('charts the latency of the forwards a proxy agent answered', opts, async () => {
    const key = await t.addUser(`latency-${dialect}`);
    const agent = await newRegisteredAgent(hostOf(t), key, {
      listing: { name: 'relay' },
      redirectUrl: 'https://relay.example/submit',
    });
    // Forwards as the proxy records them (this server forwards nowhere but the loopback).
    const now = Date.now();
    await t.server.ctx.store.repos.deliveries.record(
      [30, 40, 100].map((latency_ms) => ({
        address: agent.address,
        event: 'forwarded',
        at: now,
        status_code: 200,
        latency_ms,
      })),
    );
    const { page, problems } = await openConsole(key, `#/agents/${agent.address}/activity`);
    const chart = page.getByRole('img', {
      name: /^Forward latency per hour .*: p95 at most 100 ms$/,
    });
    await chart.waitFor();
    assert.equal(await chart.locator('rect.p50').count(), 1);
    assert.match((await chart.locator('title').textContent()) ?? '', /p50 40 ms, p95 100 ms/);
    await page.getByRole('img', { name: /: 0 stored, 3 forwarded, 0 failed forwards/ }).waitFor();
    await page.getByText('As a table').click();
    await page.getByRole('cell', { name: '40 / 100 ms' }).waitFor();
    assert.deepEqual(problems, []);
  });

  it('stops following, and says why, when what let it follow ends', opts, async () => {
    const key = await t.addUser(`ended-${dialect}`);
    const agent = await newRegisteredAgent(hostOf(t), key, { listing: { name: 'doomed' } });
    const { page, problems } = await openConsole(key, `#/agents/${agent.address}/activity`);
    const live = page.getByTestId('live');
    await live.getByText('Live').waitFor();
    const removed = await call(t.url, 'DELETE', `/v2/agents/${agent.address}`, { key });
    assert.equal(removed.status, 200, removed.text);
    await live.getByText(/^Stopped: Agent agent1\w+ was deleted by its owner/).waitFor();
    // It is over: the page does not open the stream again.
    await new Promise((resolve) => setTimeout(resolve, 6000));
    assert.match((await live.textContent()) ?? '', /^Stopped/);
    assert.deepEqual(problems, []);
  });

  it('pages to older entries', opts, async () => {
    const key = await t.addUser(`paging-${dialect}`);
    const agent = await newRegisteredAgent(hostOf(t), key, { listing: { name: 'chatty' } });
    for (let i = 0; i < 55; i++) assert.equal((await submit(agent.address)).status, 200);
    const { page, problems } = await openConsole(key, `#/agents/${agent.address}/activity`);
    const stored = page.getByTestId('timeline').locator('li[data-kind="message.stored"]');
    await stored.nth(49).waitFor();
    assert.equal(await stored.count(), 50);
    await page.getByRole('button', { name: 'Older entries' }).click();
    await stored.nth(54).waitFor();
    await page.getByTestId('timeline').locator('li[data-kind="agent.registered"]').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Older entries' }).count(), 0);
    assert.deepEqual(problems, []);
  });
});

/** The kinds of the timeline's entries, top to bottom. */
async function kinds(page: Page): Promise<string[]> {
  return page
    .getByTestId('timeline')
    .getByRole('listitem')
    .evaluateAll((items) => items.map((item) => item.getAttribute('data-kind') ?? ''));
}
