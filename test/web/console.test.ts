import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { browserSkipReason, ensureWebBuild, launchBrowser, watchPage } from '../kit/browser.js';
import { registerAgent } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { mcpClient } from '../kit/mcp.js';
import { call } from '../kit/http.js';
import { LocalAgent } from '../kit/local-agent.js';
import { freePort } from '../kit/ports.js';
import { repositoryRoot } from '../kit/process.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';
import { until } from '../kit/wait.js';

/** Set to refresh the screenshots the README shows. */
const screenshots = process.env.UPDATE_SCREENSHOTS === '1';

const HOSTILE_NAME = '<img src=x onerror=alert(1)>';
const HOSTILE_README = [
  '# Readme <script>alert("readme")</script>',
  '[click me](javascript:alert("link"))',
  '<a href="javascript:alert(2)">link</a> <svg onload=alert(3)></svg>',
  '<iframe src="javascript:alert(4)"></iframe>',
  '',
  '**Markdown** still works: [the docs](https://example.com/docs) and ![a picture](https://example.com/x.png)',
].join('\n');

/** Waits for the page's title (set once the page has rendered), failing after five seconds. */
async function titleIs(page: Page, title: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while ((await page.title()) !== title && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.equal(await page.title(), title);
}

describeOnEachDialect('web console and inspector in a browser', (dialect) => {
  let t: TestServer;
  let browser: Browser;
  const agents: LocalAgent[] = [];

  before(async () => {
    if (browserSkipReason) return;
    ensureWebBuild();
    // The agents of these tests listen on loopback, where a proxy agent's messages go.
    t = await startTestServer({ dialect, config: { allowPrivateTargets: true } });
    browser = await launchBrowser();
  });
  after(async () => {
    if (browserSkipReason) return;
    await browser.close();
    for (const agent of agents) await agent.close();
    await t.close();
  });

  async function localAgent(options: { name?: string; readme?: string } = {}) {
    const agent = await new LocalAgent({ agentry: t.url, ...options }).start();
    agents.push(agent);
    return agent;
  }

  /** A fresh browser profile (no cookies), signed in through the page's form when asked. */
  async function openPage(
    url: string,
    signInWith?: string,
  ): Promise<{ page: Page; problems: string[] }> {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    const problems = watchPage(page);
    await page.goto(url);
    if (signInWith) {
      await page.getByLabel('API key').fill(signInWith);
      await page.getByRole('button', { name: 'Sign in' }).click();
    }
    return { page, problems };
  }

  async function sendMessage(to: string, text: string): Promise<void> {
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: to, payloadJson: JSON.stringify({ text }) }),
    );
    const res = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(res.status, 200, res.text);
  }

  const opts = { skip: browserSkipReason ?? false };

  it(
    'connects an agent as a mailbox from the link it prints, with a key minted for that connect',
    opts,
    async () => {
      const agent = await localAgent({ name: 'weather bot' });
      const { page, problems } = await openPage(agent.inspectorLink(), t.userKey);
      await page.getByText('Not registered with Agentry').waitFor();
      await page.getByText(`${agent.url}/submit`).waitFor();
      await page.getByRole('button', { name: 'Connect', exact: true }).click();
      await page
        .getByText('Connected: the agent is registered with Agentry as a mailbox agent.')
        .waitFor();
      await page.getByTestId('connection').getByText('mailbox').waitFor();
      if (screenshots) {
        await page.screenshot({
          path: join(repositoryRoot, 'docs/images/inspector.png'),
          fullPage: true,
        });
      }

      const record = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
      assert.equal(record.status, 200, record.text);
      assert.equal(record.body.name, 'weather bot');
      assert.equal(record.body.redirect_url, null);
      // The agent was given a fresh key, not the one used to sign in, and it is revoked now.
      const token = agent.calls[0]!.body.user_token as string;
      assert.equal(agent.calls[0]!.body.agent_type, 'mailbox');
      assert.notEqual(token, t.userKey);
      assert.equal((await call(t.url, 'GET', '/v2/agents', { key: token })).status, 401);
      const keys = await call(t.url, 'GET', '/v2/api-keys', { key: t.userKey });
      const minted = keys.body.find((k: any) => k.label === `connect ${agent.address}`);
      assert.ok(minted?.revoked_at, keys.text);
      assert.ok(Date.parse(minted.expires_at) - Date.parse(minted.created_at) <= 300_000);
      // Nothing about the session is readable by page scripts.
      assert.equal(await page.evaluate('document.cookie'), '');
      assert.equal(await page.evaluate('JSON.stringify(localStorage)'), '{}');
      assert.deepEqual(problems, []);
    },
  );

  it(
    'refuses, with the fix, a proxy endpoint that this server would never forward to',
    opts,
    async () => {
      // A server as it starts by default: it forwards to public addresses only.
      const strict = await startTestServer({ dialect });
      try {
        const agent = await new LocalAgent({ agentry: strict.url, name: 'strict' }).start();
        agents.push(agent);
        const { page, problems } = await openPage(agent.inspectorLink(), strict.userKey);
        await page.getByText('Not registered with Agentry').waitFor();
        await page.getByLabel(/^Proxy/).check();
        await page.getByRole('button', { name: 'Connect', exact: true }).click();
        await page
          .getByText(
            /Agentry would not forward to 127\.0\.0\.1:\d+: it is a loopback or private address.*--allow-private-targets/,
          )
          .waitFor();
        assert.equal(await page.getByText('Connected').count(), 0);
        const record = await call(strict.url, 'GET', `/v2/agents/${agent.address}`, {
          key: strict.userKey,
        });
        assert.equal(record.status, 404, 'the agent was not asked to connect');
        // As a mailbox agent it connects.
        await page.getByLabel(/^Mailbox/).check();
        await page.getByRole('button', { name: 'Connect', exact: true }).click();
        await page.getByText('Connected').waitFor();
        assert.deepEqual(problems, []);
      } finally {
        await strict.close();
      }
    },
  );

  it('connects as a proxy with the endpoint given, and disconnects', opts, async () => {
    const agent = await localAgent({ name: 'proxied' });
    const { page, problems } = await openPage(agent.inspectorLink(), t.userKey);
    await page.getByText('Not registered with Agentry').waitFor();
    await page.getByLabel(/^Proxy/).check();
    const endpoint = `${agent.url}/submit`;
    assert.equal(await page.getByRole('textbox', { name: 'Endpoint' }).inputValue(), endpoint);
    await page.getByRole('button', { name: 'Connect', exact: true }).click();
    await page.getByText('as a proxy agent').waitFor();
    await page.getByTestId('connection').getByText(`proxy → ${endpoint}`).waitFor();
    const record = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
    assert.equal(record.body.redirect_url, endpoint);

    await page.getByRole('button', { name: 'Disconnect' }).click();
    await page.getByText('Disconnected').waitFor();
    await page.getByText('Not registered with Agentry').waitFor();
    const gone = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
    assert.equal(gone.status, 404);
    assert.deepEqual(problems, []);
  });

  it(
    'says when the agent is not running, the address does not match, or the key is refused',
    opts,
    async () => {
      const address = TestIdentity.random().address;
      const down = `http://127.0.0.1:${await freePort()}`;
      const { page } = await openPage(
        `${t.url}/inspect/?uri=${encodeURIComponent(down)}&address=${address}`,
      );
      await page.getByText(`The agent at ${down} does not answer`).waitFor();

      // A link naming another machine is refused before anything is fetched or minted.
      const far = encodeURIComponent('http://203.0.113.9:8001');
      const { page: remote } = await openPage(`${t.url}/inspect/?uri=${far}&address=${address}`);
      await remote
        .getByText('The inspector connects agents running on this computer only')
        .waitFor();
      assert.equal(await remote.getByRole('button', { name: 'Connect', exact: true }).count(), 0);
      const remoteCsp = (await fetch(`${t.url}/inspect/?uri=${far}`)).headers.get(
        'content-security-policy',
      );
      assert.match(remoteCsp ?? '', /connect-src 'self';/);

      const agent = await localAgent();
      const { page: other } = await openPage(
        `${t.url}/inspect/?uri=${encodeURIComponent(agent.url)}&address=${address}`,
      );
      await other.getByText('Address mismatch').waitFor();

      const { page: wrong } = await openPage(agent.inspectorLink());
      await wrong.getByLabel('API key').fill('agy_aaaaaaaaaaaa_' + 'A'.repeat(43));
      await wrong.getByRole('button', { name: 'Sign in' }).click();
      await wrong.getByText('That API key was refused: Invalid API key').waitFor();

      // An agent configured with another service, which does not know the minted key: the page
      // says what to check.
      const otherService = createServer((_req, res) => {
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ detail: 'Invalid API key' }));
      });
      const otherUrl = await listenOnLoopback(otherService);
      try {
        const elsewhere = new LocalAgent({ agentry: otherUrl });
        agents.push(await elsewhere.start());
        const { page: misconfigured } = await openPage(elsewhere.inspectorLink(t.url), t.userKey);
        await misconfigured.getByRole('button', { name: 'Connect', exact: true }).click();
        await misconfigured
          .getByText(
            `The agent's request was refused (Invalid API key). Check that the agent is configured to use this Agentry (${t.url})`,
            { exact: false },
          )
          .waitFor();
      } finally {
        await closeNow(otherService);
      }
    },
  );

  it(
    'shows the connected agent in the console with its pending messages, and deletes one',
    opts,
    async () => {
      const agent = await localAgent({ name: 'inbox' });
      const { page: inspector } = await openPage(agent.inspectorLink(), t.userKey);
      await inspector.getByRole('button', { name: 'Connect', exact: true }).click();
      await inspector.getByText('Connected').waitFor();
      await sendMessage(agent.address, 'hello from the test');
      await sendMessage(agent.address, 'second message');

      const { page, problems } = await openPage(`${t.url}/`, t.userKey);
      await page.getByRole('link', { name: 'inbox' }).click();
      await page.getByTestId('agent-name').getByText('inbox').waitFor();
      await page.getByText('2 pending').waitFor();
      await page.getByText('hello from the test').waitFor();
      if (screenshots) {
        await page.screenshot({
          path: join(repositoryRoot, 'docs/images/console.png'),
          fullPage: true,
        });
      }
      // A pending message's delivery trace, on asking.
      const first = page
        .getByTestId('messages')
        .getByRole('row')
        .filter({ hasText: 'hello from the test' });
      await first.getByRole('button', { name: 'Trace' }).click();
      await first
        .getByTestId('trace')
        .getByText(/ stored$/)
        .waitFor();
      assert.equal(await first.getByTestId('trace').getByRole('listitem').count(), 2);
      const row = page
        .getByTestId('messages')
        .getByRole('row')
        .filter({ hasText: 'second message' });
      await row.getByRole('button', { name: 'Delete' }).click();
      await page.getByText('1 pending').waitFor();
      const left = await call(t.url, 'GET', `/v2/agents/${agent.address}/mailbox`, {
        key: t.userKey,
      });
      assert.equal(left.body.length, 1);

      await page.getByRole('button', { name: 'Edit name and readme' }).click();
      await page.getByLabel('Name').fill('renamed inbox');
      await page.getByLabel('Readme').fill('Now with a readme');
      await page.getByRole('button', { name: 'Save', exact: true }).click();
      await page.getByTestId('agent-name').getByText('renamed inbox').waitFor();
      const record = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
      assert.equal(record.body.profile.readme, 'Now with a readme');

      await page.getByRole('link', { name: 'Usage' }).click();
      await page.getByText('Messages per day (UTC)').waitFor();

      await page.getByRole('link', { name: 'Agents' }).click();
      await page.getByRole('link', { name: 'renamed inbox' }).click();
      await page.getByRole('button', { name: 'Delete agent…' }).click();
      await page.getByRole('button', { name: 'Delete agent', exact: true }).click();
      await page.getByRole('heading', { name: 'Agents' }).waitFor();
      assert.equal(await page.getByRole('link', { name: 'renamed inbox' }).count(), 0);
      const deleted = await call(t.url, 'GET', `/v2/agents/${agent.address}`, { key: t.userKey });
      assert.equal(deleted.status, 404);
      assert.deepEqual(problems, []);
    },
  );

  it(
    'guides on a phone: a wrapping header, a title per page, a favicon, none, relative times, copy buttons, no matches',
    opts,
    async () => {
      const agent = TestIdentity.random();
      await registerAgent(t, t.userKey, agent, { listing: { name: 'phone agent' } });
      const context = await browser.newContext({ viewport: { width: 375, height: 740 } });
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: t.url });
      const page = await context.newPage();
      const problems = watchPage(page);
      await page.goto(`${t.url}/#/agents`);
      await titleIs(page, 'Sign in · Agentry');
      await page.getByLabel('API key').fill(t.userKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('link', { name: 'phone agent' }).waitFor();
      await titleIs(page, 'Agents · Agentry');
      // The header wraps: nothing is wider than the phone's screen.
      const widths = (await page.evaluate(`({
        page: document.documentElement.scrollWidth,
        header: document.querySelector('header').scrollWidth,
        screen: window.innerWidth,
      })`)) as { page: number; header: number; screen: number };
      assert.ok(widths.header <= widths.screen, JSON.stringify(widths));
      assert.ok(
        await page.getByRole('button', { name: 'Sign out' }).isVisible(),
        'the last item of the header is on screen',
      );
      const favicon = await page.locator('link[rel="icon"]').getAttribute('href');
      assert.equal(favicon, '/favicon.svg');
      const icon = await call(t.url, 'GET', favicon);
      assert.equal(icon.status, 200);
      assert.equal(icon.headers.get('content-type'), 'image/svg+xml');

      // A search that finds nothing says so.
      await page.getByLabel('Search agents').fill('no-agent-is-called-this');
      await page.getByTestId('no-matches').getByText('No matches').waitFor();
      await page.getByLabel('Search agents').fill('');

      await page.getByRole('link', { name: 'phone agent' }).click();
      await page.getByRole('button', { name: 'Copy address' }).waitFor();
      await titleIs(page, 'Agent · Agentry');
      // Relative, with the exact time on hover.
      const registered = page.locator('dd time').first();
      assert.match((await registered.textContent()) ?? '', /^(just now|\d+ min ago)$/);
      const exact = await registered.getAttribute('title');
      assert.ok(
        exact && !Number.isNaN(Date.parse((await registered.getAttribute('datetime')) ?? '')),
      );
      assert.notEqual(exact, await registered.textContent());
      // One way to show none: no handle, no description, no readme.
      assert.ok((await page.locator('.none').count()) >= 2);
      const text = (await page.locator('main').textContent()) ?? '';
      assert.doesNotMatch(text, /—|\(none\)/);
      // The copy button copies the address.
      await page.getByRole('button', { name: 'Copy address' }).click();
      await page.getByRole('button', { name: 'Copy address' }).getByText('Copied').waitFor();
      assert.equal(await page.evaluate('navigator.clipboard.readText()'), agent.address);

      await page.goto(`${t.url}/#/keys`);
      // Polled from here: a string waited for in the page is evaluated there, and the page's
      // Content-Security-Policy refuses that whenever the first look does not already hold.
      await until(async () => (await page.title()) === 'API keys · Agentry', 'the keys page');
      const inspector = await context.newPage();
      await inspector.goto(`${t.url}/inspect/`);
      assert.equal(
        await inspector.locator('link[rel="icon"]').getAttribute('href'),
        '/favicon.svg',
      );
      assert.deepEqual(problems, []);
      await context.close();
    },
  );

  it(
    'fits the header on one row at 1280 px, and wraps it within the screen narrower',
    opts,
    async () => {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      const problems = watchPage(page);
      await page.goto(`${t.url}/#/agents`);
      await page.getByLabel('API key').fill(t.userKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      const signOut = page.getByRole('button', { name: 'Sign out' });
      await signOut.waitFor();
      const header = page.locator('header');
      const nav = page.locator('header nav');
      const row = async () => ({
        header: (await header.boundingBox())!,
        agents: (await nav.getByRole('link', { name: 'Agents' }).boundingBox())!,
        docs: (await nav.getByRole('link', { name: 'API docs' }).boundingBox())!,
        switcher: (await page.getByLabel('Acting as').boundingBox())!,
        signOut: (await signOut.boundingBox())!,
      });
      const wide = await row();
      assert.ok(wide.header.height < 70, `a header of one row: ${JSON.stringify(wide)}`);
      const middle = (box: { y: number; height: number }) => box.y + box.height / 2;
      for (const box of [wide.docs, wide.switcher, wide.signOut]) {
        assert.ok(Math.abs(middle(box) - middle(wide.agents)) < 12, JSON.stringify(wide));
      }
      // Narrower, it wraps without overflowing, the switcher and Sign out side by side.
      await page.setViewportSize({ width: 900, height: 800 });
      const narrow = await row();
      const overflow = (await page.evaluate(
        `document.querySelector('header').scrollWidth - window.innerWidth`,
      )) as number;
      assert.ok(overflow <= 0, `the header overflows by ${overflow}px`);
      assert.ok(Math.abs(middle(narrow.switcher) - middle(narrow.signOut)) < 12);
      assert.ok(narrow.signOut.x + narrow.signOut.width <= 900);
      assert.deepEqual(problems, []);
      await context.close();
    },
  );

  it('shows every time one way: how long ago, the exact UTC time on hover', opts, async () => {
    const key = await t.addUser(`times-${dialect}`);
    const agent = TestIdentity.random();
    await registerAgent(t, key, agent, { listing: { name: 'timed agent' } });
    const made = await call(t.url, 'POST', '/v2/api-keys', { key, body: { label: 'old key' } });
    assert.ok(made.status < 300, made.text);
    const revoked = await call(t.url, 'DELETE', `/v2/api-keys/${made.body.id}`, { key });
    assert.ok(revoked.status < 300, revoked.text);
    const team = await call(t.url, 'POST', '/v2/teams', {
      key,
      body: { slug: `times-${dialect}` },
    });
    assert.ok(team.status < 300, team.text);
    const { page, problems } = await openPage(`${t.url}/#/agents`, key);
    await page.getByRole('link', { name: 'timed agent' }).waitFor();
    const pages: [string, string][] = [
      [`#/agents/${agent.address}`, 'Registered'],
      ['#/keys', 'revoked'],
      [`#/teams/times-${dialect}`, 'Added'],
      ['#/usage', 'This period ends'],
    ];
    for (const [route, text] of pages) {
      await page.goto(`${t.url}/${route}`);
      await page.locator('main').getByText(text).first().waitFor();
      await page.locator('main time').first().waitFor();
      const shown = (await page.evaluate(`[...document.querySelectorAll('main time')].map((e) => ({
        text: e.textContent, title: e.getAttribute('title'), at: e.getAttribute('datetime'),
      }))`)) as { text: string; title: string; at: string }[];
      assert.ok(shown.length > 0, route);
      for (const time of shown) {
        assert.match(time.title, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/, route);
        assert.equal(
          time.title,
          `${new Date(time.at).toISOString().slice(0, 19).replace('T', ' ')} UTC`,
        );
        assert.match(
          time.text,
          /^(just now|(in )?\d+ (min|h|days)( ago)?)$/,
          `${route}: ${time.text}`,
        );
      }
      const main = (await page.locator('main').textContent()) ?? '';
      assert.doesNotMatch(main, /\d{1,2}\/\d{1,2}\/\d{4}|\d:\d\d(:\d\d)? ?[AP]M/, route);
    }
    assert.deepEqual(problems, []);
  });

  it(
    'charts usage by day, today the last bar, with every label inside the chart',
    opts,
    async () => {
      const key = await t.addUser(`daily-${dialect}`);
      const agent = TestIdentity.random();
      await registerAgent(t, key, agent, { listing: { name: 'busy agent' } });
      await sendMessage(agent.address, 'one');
      await sendMessage(agent.address, 'two');
      const { page, problems } = await openPage(`${t.url}/#/usage`, key);
      const chart = page.getByTestId('usage-chart');
      await chart.waitFor();
      const today = new Date().toISOString().slice(0, 10);
      const bars = (await chart.evaluate((svg) =>
        [...svg.querySelectorAll('g[data-day]')].map((g) => [
          g.getAttribute('data-day'),
          Number(g.getAttribute('data-messages')),
        ]),
      )) as [string, number][];
      assert.equal(bars.length, 30);
      assert.deepEqual(bars.at(-1), [today, 2]);
      assert.ok(bars.slice(0, -1).every(([, n]) => n === 0));
      assert.match(
        (await chart.locator(`g[data-day="${today}"] title`).textContent()) ?? '',
        /: 2 messages, /,
      );
      const box = (await chart.boundingBox())!;
      const labels = chart.locator('text');
      assert.ok((await labels.count()) >= 6);
      for (const label of await labels.all()) {
        const b = (await label.boundingBox())!;
        assert.ok(
          b.x >= box.x - 0.5 && b.x + b.width <= box.x + box.width + 0.5,
          `${await label.textContent()} is clipped`,
        );
        assert.ok(b.y >= box.y - 0.5 && b.y + b.height <= box.y + box.height + 0.5);
      }
      await page.getByTestId('usage-months').getByText(today.slice(0, 7)).waitFor();
      assert.deepEqual(problems, []);
    },
  );

  it(
    'names protocols by their published manifests, the digest beside, and falls back to the digest',
    opts,
    async () => {
      const { greeter } = JSON.parse(
        readFileSync(join(repositoryRoot, 'test/fixtures/uagents-manifests.json'), 'utf8'),
      );
      const published = await call(t.url, 'POST', '/v1/almanac/manifests', { body: greeter });
      assert.equal(published.status, 200, published.text);
      const unknown = `proto:${'ab'.repeat(32)}`;
      const agent = TestIdentity.random();
      await registerAgent(t, t.userKey, agent, {
        listing: { name: 'greeting agent', protocols: [greeter.metadata.digest, unknown] },
      });
      const { page, problems } = await openPage(`${t.url}/#/agents/${agent.address}`, t.userKey);
      const named = page.locator(`.protocol[data-digest="${greeter.metadata.digest}"]`);
      await named.waitFor();
      assert.equal(
        await named.locator('.protocol-name').textContent(),
        `${greeter.metadata.name} ${greeter.metadata.version}`,
      );
      assert.equal(await named.locator('.secondary').textContent(), greeter.metadata.digest);
      await page.locator('main').getByText(unknown, { exact: true }).waitFor();
      assert.equal(await page.locator(`.protocol[data-digest="${unknown}"]`).count(), 0);
      assert.deepEqual(problems, []);
    },
  );

  it('names the senders that are your own agents, with their address at hand', opts, async () => {
    const key = await t.addUser(`senders-${dialect}`);
    const [mine, inbox] = [TestIdentity.random(), TestIdentity.random()];
    await registerAgent(t, key, mine, { listing: { name: 'my reporter' } });
    await registerAgent(t, key, inbox, { listing: { name: 'my inbox' } });
    const stranger = TestIdentity.random();
    for (const [sender, text] of [
      [mine, 'from my own'],
      [stranger, 'from a stranger'],
    ] as const) {
      const envelope = sender.signEnvelope(
        makeEnvelope({
          sender: sender.address,
          target: inbox.address,
          payloadJson: JSON.stringify({ text }),
        }),
      );
      const res = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
      assert.equal(res.status, 200, res.text);
    }
    const { page, problems } = await openPage(`${t.url}/#/agents/${inbox.address}`, key);
    const named = page.locator(`main a.agent-ref[data-address="${mine.address}"]`).first();
    await named.waitFor();
    assert.equal(await named.textContent(), 'my reporter');
    assert.equal(await named.getAttribute('title'), mine.address);
    assert.equal(await named.getAttribute('href'), `#/agents/${mine.address}`);
    await page.locator('main').getByText(stranger.address, { exact: true }).waitFor();

    await page.goto(`${t.url}/#/agents/${inbox.address}/activity`);
    const entry = page
      .getByTestId('timeline')
      .locator('li', { hasText: 'message from my reporter' });
    await entry.first().waitFor();
    assert.equal(await entry.first().locator('a.agent-ref').getAttribute('title'), mine.address);
    await page
      .getByTestId('timeline')
      .getByText(`message from ${stranger.address.slice(0, 12)}…${stranger.address.slice(-6)}`)
      .first()
      .waitFor();
    assert.deepEqual(problems, []);
  });

  it('creates a key shown once and revokes it', opts, async () => {
    const { page, problems } = await openPage(`${t.url}/#/keys`, t.userKey);
    await page.getByLabel('Label').fill('deploy script');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = (await page.getByTestId('new-key').textContent())!;
    assert.match(key, /^agy_/);
    assert.equal((await call(t.url, 'GET', '/v2/agents', { key })).status, 200);
    const row = page.getByTestId('keys').getByRole('row').filter({ hasText: 'deploy script' });
    await row.getByRole('button', { name: 'Revoke' }).click();
    await row.getByText('revoked').waitFor();
    assert.equal((await call(t.url, 'GET', '/v2/agents', { key })).status, 401);
    // Once the page is left, the key is not shown again.
    await page.reload();
    await page.getByTestId('keys').waitFor();
    assert.equal(await page.getByTestId('new-key').count(), 0);
    assert.ok(!(await page.content()).includes(key));
    assert.deepEqual(problems, []);
  });

  it('shows the assistants connected through MCP, and ends one', opts, async () => {
    const assistant = await mcpClient(t.url, t.userKey);
    const { page, problems } = await openPage(`${t.url}/#/keys`, t.userKey);
    assert.equal(await page.getByTestId('mcp-url').textContent(), `${t.url}/mcp`);
    const row = page
      .getByTestId('mcp-sessions')
      .locator(`[data-session="${assistant.transport.sessionId}"]`);
    await row.getByText('agentry-test 1.0.0').waitFor();
    await row.getByRole('button', { name: 'End' }).click();
    await row.waitFor({ state: 'detached' });
    await assert.rejects(assistant.client.listTools(), /404|not found/i);
    await assistant.client.close();
    assert.deepEqual(problems, []);
  });

  it('ends the session on the page when its key is revoked elsewhere', opts, async () => {
    const key = await t.addUser(`revoked-${dialect}`);
    const { page, problems } = await openPage(`${t.url}/#/keys`, key);
    await page.getByTestId('keys').waitFor();
    const own = await call(t.url, 'GET', '/v2/api-keys', { key });
    assert.equal(own.status, 200);
    assert.equal(own.body.length, 1);
    assert.equal(
      (await call(t.url, 'DELETE', `/v2/api-keys/${own.body[0].id}`, { key })).status,
      200,
    );
    // A write, not a page load: the answer's 401 ends the session wherever it comes from.
    await page.getByLabel('Label').fill('too late');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await page
      .getByRole('alert')
      .getByText(/revoked/)
      .waitFor();
    assert.equal(await page.getByTestId('keys').count(), 0);
    assert.deepEqual(problems, []);
  });

  it(
    'claims a name, assigns agents with weights, resolves it, removes an agent and releases it',
    opts,
    async () => {
      const HOSTILE_AGENT = '<img src=y onerror=alert(5)>';
      const first = TestIdentity.random();
      const second = TestIdentity.random();
      await registerAgent(t, t.userKey, first, { listing: { name: 'weather first' } });
      await registerAgent(t, t.userKey, second, { listing: { name: HOSTILE_AGENT } });
      const bobKey = await t.addUser('bob-names');
      const bobs = await call(t.url, 'POST', '/v2/users/domains', {
        key: bobKey,
        body: { domain_name: 'taken.agent' },
      });
      assert.equal(bobs.status, 201, bobs.text);
      const resolve = (name: string) => call(t.url, 'GET', `/v1/almanac/domains/${name}`);

      const { page, problems } = await openPage(`${t.url}/`, t.userKey);
      await page.getByRole('link', { name: 'Names', exact: true }).click();
      await page.getByText('You have no names yet.').waitFor();
      const claim = page.getByRole('form', { name: 'Claim a name' });
      await claim.getByLabel('Name').fill('Not_A_Name');
      await claim.getByRole('button', { name: 'Claim name' }).click();
      await claim.getByText('Not_A_Name is not a valid name').waitFor();
      await claim.getByLabel('Name').fill('taken.agent');
      await claim.getByRole('button', { name: 'Claim name' }).click();
      await claim.getByText('taken.agent is already taken by someone else').waitFor();
      assert.deepEqual((await resolve('taken.agent')).body.assigned_agents, []);

      await claim.getByLabel('Name').fill('weather.agent');
      await claim.getByLabel('Agent').selectOption(first.address);
      await claim.getByLabel('Weight').fill('3');
      await claim.getByRole('button', { name: 'Claim name' }).click();
      await page.getByText('weather.agent is yours.').waitFor();
      const card = page.locator('[data-domain="weather.agent"]');
      await card
        .getByRole('row')
        .filter({ hasText: first.address })
        .getByRole('cell', { name: '3', exact: true })
        .waitFor();
      let resolved = await resolve('weather.agent');
      assert.equal(resolved.status, 200, resolved.text);
      assert.deepEqual(resolved.body.assigned_agents, [{ address: first.address, weight: 3 }]);

      // The second agent, whose name is hostile, is listed as text.
      await card.getByLabel('Agent').selectOption(second.address);
      await card.getByLabel('Weight').fill('1');
      await card.getByRole('button', { name: 'Assign' }).click();
      await card.getByRole('link', { name: HOSTILE_AGENT }).waitFor();
      resolved = await resolve('weather.agent');
      assert.deepEqual(
        [...resolved.body.assigned_agents].sort((a: any, b: any) => b.weight - a.weight),
        [
          { address: first.address, weight: 3 },
          { address: second.address, weight: 1 },
        ],
      );

      await card
        .getByRole('row')
        .filter({ hasText: first.address })
        .getByRole('button', { name: 'Remove' })
        .click();
      await page.getByText('Agent removed from weather.agent.').waitFor();
      await card.getByRole('row').filter({ hasText: first.address }).waitFor({ state: 'detached' });
      resolved = await resolve('weather.agent');
      assert.deepEqual(resolved.body.assigned_agents, [{ address: second.address, weight: 1 }]);

      await card.getByRole('button', { name: 'Release…' }).click();
      await card.getByRole('button', { name: 'Release name' }).click();
      await page.getByText('weather.agent released.').waitFor();
      await page.getByText('You have no names yet.').waitFor();
      assert.equal((await resolve('weather.agent')).status, 404);
      const mine = await call(t.url, 'GET', '/v2/users/domains', { key: t.userKey });
      assert.deepEqual(mine.body, []);
      const handlers = await page.evaluate(
        `[...document.querySelectorAll('*')].filter((el) => [...el.attributes].some((a) => a.name.startsWith('on'))).length`,
      );
      assert.equal(handlers, 0);
      assert.deepEqual(problems, []);
    },
  );

  it('renders hostile names and readmes as text: nothing executes', opts, async () => {
    const agent = await localAgent({ name: HOSTILE_NAME, readme: HOSTILE_README });
    const { page: inspector, problems: inspectorProblems } = await openPage(
      agent.inspectorLink(),
      t.userKey,
    );
    await inspector.getByRole('button', { name: 'Connect', exact: true }).click();
    await inspector.getByText('Connected').waitFor();
    await inspector.getByRole('link', { name: HOSTILE_NAME }).waitFor();

    const { page, problems } = await openPage(`${t.url}/`, t.userKey);
    await page.getByRole('link', { name: HOSTILE_NAME }).click();
    await page
      .getByTestId('readme')
      .getByText('<script>alert("readme")</script>', { exact: false })
      .waitFor();
    const dom = (await page.evaluate(`({
      scripts: [...document.scripts].map((s) => s.src),
      images: document.images.length,
      frames: document.querySelectorAll('iframe, svg[onload]').length,
      javascriptLinks: document.querySelectorAll('a[href^="javascript:"]').length,
      handlers: [...document.querySelectorAll('*')].filter((el) =>
        [...el.attributes].some((a) => a.name.startsWith('on')),
      ).length,
    })`)) as {
      scripts: string[];
      images: number;
      frames: number;
      javascriptLinks: number;
      handlers: number;
    };
    assert.equal(dom.scripts.length, 1, JSON.stringify(dom.scripts));
    assert.match(dom.scripts[0]!, /\/assets\/console-[\w-]+\.js$/);
    assert.equal(dom.images, 0);
    assert.equal(dom.frames, 0);
    assert.equal(dom.javascriptLinks, 0);
    assert.equal(dom.handlers, 0);
    // Markdown is rendered, safely: emphasis, and a link only where it is http(s).
    const readme = page.getByTestId('readme');
    await readme.locator('strong', { hasText: 'Markdown' }).waitFor();
    const link = readme.getByRole('link', { name: 'the docs' });
    assert.equal(await link.getAttribute('href'), 'https://example.com/docs');
    assert.match((await link.getAttribute('rel')) ?? '', /noopener/);
    assert.equal(await readme.getByRole('link').count(), 1);
    await readme.getByText('click me').waitFor();
    assert.deepEqual(problems, []);
    assert.deepEqual(inspectorProblems, []);
  });

  it(
    'serves the pages with a strict Content-Security-Policy that blocks inline script',
    opts,
    async () => {
      const res = await fetch(`${t.url}/inspect/?uri=http%3A//127.0.0.1%3A8001&address=x`);
      const csp = res.headers.get('content-security-policy') ?? '';
      assert.match(csp, /script-src 'self'(;|$)/);
      assert.match(csp, /connect-src 'self' http:\/\/127\.0\.0\.1:8001(;|$)/);
      assert.ok(!/unsafe-inline|unsafe-eval/.test(csp));
      const { page, problems } = await openPage(`${t.url}/`);
      await page.getByLabel('API key').waitFor();
      // A script injected into the page at run time is refused by the policy.
      await page.evaluate(`{
      const s = document.createElement('script');
      s.textContent = 'window.injected = true';
      document.body.append(s);
    }`);
      assert.equal(await page.evaluate('window.injected'), undefined);
      assert.ok(
        problems.some((p) => /Content Security Policy/.test(p)),
        problems.join('\n'),
      );
    },
  );
});
