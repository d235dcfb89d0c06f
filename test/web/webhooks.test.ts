import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { Browser } from 'playwright-core';
import { browserSkipReason, ensureWebBuild, launchBrowser, watchPage } from '../kit/browser.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';
import { startTestServer, type TestServer } from '../kit/server.js';

/**
 * The console's Webhooks page (docs/webhooks.md): a hook the server would never deliver to is
 * refused with the reason; a hook is made, tested, its deliveries opened to their request and
 * response, and one sent again.
 */
describeOnEachDialect('webhooks in the console', (dialect) => {
  /** A server as it comes: private targets refused. */
  let guarded: TestServer;
  /** A server of the same database that allows them. */
  let allowing: TestServer;
  let browser: Browser;
  const received: string[] = [];
  /** What the receiver answers next; 200 once these are spent. */
  const answers: number[] = [];
  const receiver = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push(Buffer.concat(chunks).toString('utf8'));
      response
        .writeHead(answers.shift() ?? 200, { 'content-type': 'text/plain', 'x-receiver': 'ops' })
        .end('thanks, noted');
    });
  });
  let receiverUrl: string;

  before(async () => {
    if (browserSkipReason) return;
    ensureWebBuild();
    receiverUrl = await listenOnLoopback(receiver);
    guarded = await startTestServer({ dialect });
    allowing = await startTestServer({ replicaOf: guarded, config: { allowPrivateTargets: true } });
    browser = await launchBrowser();
  });
  after(async () => {
    if (browserSkipReason) return;
    await browser?.close();
    await allowing?.close();
    await guarded?.close();
    await closeNow(receiver);
  });

  const opts = { skip: browserSkipReason ?? false };

  it(
    'refuses a URL it would never deliver to with the reason, then makes, tests and redelivers a hook, showing each request and response',
    opts,
    async () => {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      const problems = watchPage(page);
      const url = `${receiverUrl}/ops`;

      await page.goto(`${guarded.url}/#/webhooks`);
      await page.getByLabel('API key').fill(guarded.userKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('link', { name: 'Webhooks' }).waitFor();
      await page.getByLabel('URL').fill(url);
      await page.getByRole('checkbox', { name: 'event.error' }).check();
      await page.getByRole('button', { name: 'Create webhook' }).click();
      const refusal = page.getByRole('alert');
      await refusal.getByText(/would be refused/).waitFor();
      assert.match(
        (await refusal.textContent()) ?? '',
        /127\.0\.0\.1.*private or special-purpose address.*AGENTRY_ALLOW_PRIVATE_TARGETS=true/,
      );
      await page.getByText('No webhook yet.').waitFor();

      // The same database through a server that allows private targets (the session cookie,
      // which names no port, is the same session).
      await page.goto(`${allowing.url}/#/webhooks`);
      await page.getByLabel('URL').fill(url);
      await page.getByLabel('Description').fill('the ops channel');
      await page.getByRole('checkbox', { name: 'event.error' }).check();
      await page.getByRole('checkbox', { name: 'agent.silent' }).check();
      await page.getByRole('button', { name: 'Create webhook' }).click();
      const secret = await page.getByTestId('new-secret').textContent();
      assert.match(secret ?? '', /^whsec_/);
      const [hook] = (await call(allowing.url, 'GET', '/v2/webhooks', { key: guarded.userKey }))
        .body as { id: string; kinds: string[]; description: string }[];
      assert.deepEqual(hook!.kinds, ['event.error', 'agent.silent']);
      assert.equal(hook!.description, 'the ops channel');
      const row = page.locator(`[data-webhook="${hook!.id}"]`);
      await row.getByText(url).waitFor();

      answers.push(502);
      await row.getByRole('button', { name: 'Test' }).click();
      const deliveries = page.getByTestId('webhook-deliveries');
      const first = deliveries.locator('details.delivery').first();
      await first.getByText('answered 502').waitFor();
      await first.locator('summary').click();
      assert.equal(await first.getByTestId('response-body').textContent(), 'thanks, noted');
      await first.getByText('x-receiver: ops').waitFor();
      await first.getByText(/^agentry-signature: t=\d+,v1=[0-9a-f]{64}$/m).waitFor();
      const sent = JSON.parse((await first.getByTestId('request-body').textContent()) ?? '');
      assert.deepEqual(sent, JSON.parse(received[0]!));
      await first.getByText('answered with status 502').waitFor();

      await first.getByRole('button', { name: 'Redeliver' }).click();
      const again = deliveries.locator('details.delivery').first();
      await again.locator('summary').getByText('redelivery').waitFor();
      await again.getByText('answered 200').waitFor();
      assert.equal(await deliveries.locator('details.delivery').count(), 2);
      assert.equal(received.length, 2);
      assert.equal(JSON.parse(received[1]!).kind, 'webhook.test');
      assert.notEqual(JSON.parse(received[1]!).id, sent.id);
      assert.deepEqual(problems, []);
      await context.close();
    },
  );
});
