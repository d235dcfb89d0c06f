import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Browser, Page } from 'playwright-core';
import { loadConfig } from '../../src/config/index.js';
import { browserSkipReason, ensureWebBuild, launchBrowser, watchPage } from '../kit/browser.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { repositoryRoot } from '../kit/process.js';
import { startTestServer, type TestServer } from '../kit/server.js';

/** What the build measured (web/vite.config.ts): the pages' scripts and those loaded later. */
interface BuildSize {
  jsGzipBytes: number;
  budget: number;
  lazy: Record<string, { bytes: number; gzipBytes: number }>;
  lazyBudget: number;
}

const AGENT_PY = [
  'from helpers import greeting',
  '',
  '@agent.on_interval(period=5.0)',
  'async def hello(ctx):',
  '    ctx.logger.info(greeting(agent.name))',
  '',
].join('\n');

/** The code a hosted agent made in the console starts with. */
const TEMPLATE = [
  'from uagents import Context',
  '',
  '',
  '@agent.on_interval(period=10.0)',
  'async def hello(ctx: Context):',
  '    ctx.logger.info(f"Hello from {agent.name}")',
  '',
].join('\n');

describeOnEachDialect('web console: hosted agents', (dialect) => {
  let t: TestServer;
  let browser: Browser;

  before(async () => {
    if (browserSkipReason) return;
    ensureWebBuild();
    // With a hosting key of its own: on PostgreSQL none is made by itself. No Python is set, so
    // this server runs no agents.
    const hosting = { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') };
    t = await startTestServer({ dialect, config: { hosting } });
    browser = await launchBrowser();
  });
  after(async () => {
    if (browserSkipReason) return;
    await browser.close();
    await t.close();
  });

  /**
   * A fresh browser profile signed in with `key` on `hash` of the console, with the paths of
   * the scripts it fetched and their gzipped sizes.
   */
  async function openConsole(key: string, hash: string) {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    const problems = watchPage(page);
    // Each script is known as soon as its answer arrives; its size once its body has.
    const scripts = new Map<string, Promise<number>>();
    page.on('response', (response) => {
      const path = new URL(response.url()).pathname;
      if (!path.endsWith('.js')) return;
      scripts.set(
        path,
        response.body().then(
          (body) => gzipSync(body, { level: 9 }).length,
          () => -1,
        ),
      );
    });
    await page.goto(`${t.url}/${hash}`);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    return { page, problems, scripts };
  }

  /** The hosted agent as the API tells its owner. */
  async function hosted(key: string, address: string, headers: Record<string, string> = {}) {
    const res = await call(t.url, 'GET', `/v1/hosting/agents/${address}`, { key, headers });
    assert.equal(res.status, 200, res.text);
    return res.body;
  }

  /** Replaces the text of the file shown in the editor by `text`, as a person would. */
  async function typeInto(page: Page, file: string, text: string): Promise<void> {
    const editor = page.getByRole('textbox', { name: `Code of ${file}` });
    await editor.click();
    await page.keyboard.press('Control+A');
    await page.keyboard.press('Backspace');
    await page.keyboard.insertText(text);
  }

  const opts = { skip: browserSkipReason ?? false };

  it(
    'loads the editor only on the hosted agent page, and the other pages stay within the budget',
    opts,
    async () => {
      const size = JSON.parse(
        readFileSync(join(repositoryRoot, 'dist/web/size.json'), 'utf8'),
      ) as BuildSize;
      const lazy = Object.keys(size.lazy).map((file) => `/${file}`);
      const editorChunk = lazy.find((file) => /\/editor-[^/]+\.js$/.test(file));
      assert.ok(editorChunk, `the editor is a chunk of its own: ${JSON.stringify(size)}`);
      assert.ok(size.jsGzipBytes <= size.budget, JSON.stringify(size));
      assert.ok(size.lazy[editorChunk.slice(1)]!.gzipBytes <= size.lazyBudget);

      const key = await t.addUser(`budget-${dialect}`);
      const { page, problems, scripts } = await openConsole(key, '#/agents');
      await page.getByRole('heading', { name: 'Agents' }).waitFor();
      await page.getByRole('link', { name: 'Hosted' }).click();
      await page.getByRole('heading', { name: 'Hosted agents' }).waitFor();
      await page.getByText('No hosted agents yet').waitFor();
      const loaded = [...scripts.keys()];
      assert.ok(loaded.length > 0);
      assert.deepEqual(
        loaded.filter((file) => lazy.includes(file)),
        [],
        'no chunk loaded on demand is fetched by the agents or hosted agents list',
      );
      const eager = (await Promise.all(scripts.values())).reduce((sum, bytes) => sum + bytes, 0);
      assert.ok(eager <= size.budget, `${eager} bytes gzipped over the budget of ${size.budget}`);

      await page.getByLabel('New agent name').fill('budget bot');
      await page.getByRole('button', { name: 'Create hosted agent' }).click();
      await page.getByRole('textbox', { name: 'Code of agent.py' }).waitFor();
      assert.ok(scripts.has(editorChunk), `fetched: ${[...scripts.keys()].join(', ')}`);
      assert.deepEqual(problems, []);
    },
  );

  it(
    'creates a hosted agent, saves code in two files, adds a secret, starts and stops it',
    opts,
    async () => {
      const key = await t.addUser(`hoster-${dialect}`);
      const { page, problems } = await openConsole(key, '#/hosted');
      await page.getByLabel('New agent name').fill('echo bot');
      await page.getByRole('button', { name: 'Create hosted agent' }).click();
      await page.getByTestId('hosted-name').getByText('echo bot').waitFor();
      const address = decodeURIComponent(new URL(page.url()).hash.replace('#/hosted/', ''));
      assert.match(address, /^agent1q/);
      await page.getByTestId('hosted-state').locator('[data-state="stopped"]').waitFor();
      // The template is its code, saved: nothing to save before it can start.
      await page.getByTestId('code-state').getByText('Saved', { exact: true }).waitFor();
      const template = await call(t.url, 'GET', `/v1/hosting/agents/${address}/code`, { key });
      assert.equal(template.status, 200, template.text);
      assert.deepEqual(JSON.parse(template.body.code), [
        { name: 'agent.py', language: 'python', value: TEMPLATE },
      ]);
      assert.equal(await page.getByTestId('code-digest').textContent(), template.body.digest);

      // A file added, renamed and deleted again; agent.py can be neither.
      await page.getByLabel('New file name').fill('scratch.py');
      await page.getByRole('button', { name: 'Add file' }).click();
      await page.getByLabel('Rename scratch.py to').fill('notes/todo.md');
      await page.getByRole('button', { name: 'Rename' }).click();
      await page.getByRole('button', { name: 'Delete notes/todo.md' }).click();
      assert.equal(await page.getByRole('button', { name: 'notes/todo.md' }).count(), 0);
      await page.getByRole('button', { name: 'agent.py', exact: true }).click();
      assert.equal(await page.getByRole('button', { name: 'Delete agent.py' }).count(), 0);
      assert.equal(await page.getByLabel('Rename agent.py to').count(), 0);

      // Two files: agent.py imports the other.
      await typeInto(page, 'agent.py', AGENT_PY);
      await page.getByLabel('New file name').fill('helpers.py');
      await page.getByRole('button', { name: 'Add file' }).click();
      await typeInto(page, 'helpers.py', 'def greeting(name):');
      await page.keyboard.press('Enter');
      await page.keyboard.type('return f"hello from {name}"');
      await page.getByRole('button', { name: 'agent.py', exact: true }).click();
      await page.getByText('Unsaved changes').waitFor();
      await page.getByRole('button', { name: 'Save code' }).click();
      // Exactly: "Unsaved changes", shown until the save is answered, holds "saved" too.
      await page.getByTestId('code-state').getByText('Saved', { exact: true }).waitFor();
      const digest = page.getByTestId('code-digest');

      const code = await call(t.url, 'GET', `/v1/hosting/agents/${address}/code`, { key });
      assert.equal(code.status, 200, code.text);
      assert.deepEqual(JSON.parse(code.body.code), [
        { name: 'agent.py', language: 'python', value: AGENT_PY },
        // The editor indents the line after the colon, as Python wants.
        {
          name: 'helpers.py',
          language: 'python',
          value: 'def greeting(name):\n    return f"hello from {name}"',
        },
      ]);
      assert.equal(await digest.textContent(), code.body.digest);
      assert.equal(code.body.digest, createHash('sha256').update(code.body.code).digest('hex'));

      // Coming back, the page shows the files as saved, with nothing unsaved.
      await page.reload();
      await page.getByTestId('code-state').getByText('Saved', { exact: true }).waitFor();
      await page.getByRole('button', { name: 'helpers.py', exact: true }).click();
      await page
        .getByRole('textbox', { name: 'Code of helpers.py' })
        .getByText('return f"hello from {name}"')
        .waitFor();

      // A secret: listed by name, its value masked.
      await page.getByLabel('Secret name').fill('API_TOKEN');
      await page.getByLabel('Secret value').fill('s3cret-value-123');
      await page.getByRole('button', { name: 'Save secret' }).click();
      const row = page.getByTestId('secrets').locator('[data-secret="API_TOKEN"]');
      await row.waitFor();
      assert.doesNotMatch((await row.textContent()) ?? '', /s3cret-value-123/);
      assert.equal(await page.getByLabel('Secret value').inputValue(), '');
      const secrets = await call(t.url, 'GET', `/v1/hosting/${address}/secrets`, { key });
      assert.deepEqual(
        secrets.body.secrets.map((s: { name: string }) => s.name),
        ['API_TOKEN'],
      );
      assert.doesNotMatch(secrets.text, /s3cret-value-123/);
      // Another, deleted again.
      await page.getByLabel('Secret name').fill('OTHER');
      await page.getByLabel('Secret value').fill('x');
      await page.getByRole('button', { name: 'Save secret' }).click();
      await page.getByRole('button', { name: 'Delete secret OTHER' }).click();
      await page
        .getByTestId('secrets')
        .locator('[data-secret="OTHER"]')
        .waitFor({ state: 'detached' });
      const kept = await call(t.url, 'GET', `/v1/hosting/${address}/secrets`, { key });
      assert.deepEqual(
        kept.body.secrets.map((s: { name: string }) => s.name),
        ['API_TOKEN'],
      );

      // Start: the agent is to run, but this server runs no agents and no runner is about, so
      // its state stays stopped and the reason says what it waits for.
      const stateCell = page.getByTestId('hosted-state');
      await page.getByRole('button', { name: 'Start', exact: true }).click();
      await stateCell.getByText(/^Waiting for a runner: none is running/).waitFor();
      const started = await hosted(key, address);
      assert.equal(started.running, true);
      assert.equal(started.state, 'stopped');
      assert.match(started.state_reason, /^Waiting for a runner: none is running/);
      assert.equal(await stateCell.getByTestId('state-reason').textContent(), started.state_reason);
      await stateCell.locator('[data-state="stopped"]').waitFor();
      // Asked to run, it can be stopped; starting it again waits for the same runner.
      assert.equal(
        await page.getByRole('button', { name: 'Start', exact: true }).isEnabled(),
        true,
      );

      await page.getByRole('button', { name: 'Stop', exact: true }).click();
      await stateCell.getByText('Stopped by its owner').waitFor();
      const stopped = await hosted(key, address);
      assert.equal(stopped.running, false);
      assert.equal(stopped.state, 'stopped');
      assert.equal(
        await page.getByRole('button', { name: 'Stop', exact: true }).isDisabled(),
        true,
      );

      // The list shows it with its state and the reason.
      await page.getByRole('link', { name: 'All hosted agents' }).click();
      const listed = page.getByTestId('hosted-agents').locator(`[data-address="${address}"]`);
      await listed.locator('[data-state="stopped"]').waitFor();
      await listed.getByText('Stopped by its owner').waitFor();
      assert.deepEqual(problems, []);
    },
  );

  it(
    'follows the logs as the runner writes them, clears them, and deletes the agent',
    opts,
    async () => {
      const key = await t.addUser(`logs-${dialect}`);
      const made = await call(t.url, 'POST', '/v1/hosting/agents', {
        key,
        body: { name: 'chatty' },
      });
      assert.equal(made.status, 200, made.text);
      const address = made.body.address as string;
      const { page, problems } = await openConsole(key, `#/hosted/${address}`);
      await page.getByTestId('hosted-name').getByText('chatty').waitFor();
      // This server runs no agents: the test writes the lines the runner would.
      const hosting = t.server.ctx.services.hosting;
      await hosting.appendLogs(address, [
        { time: new Date(), level: 'info', type: 'execution', entry: 'INFO: [chatty]: first line' },
      ]);
      const logs = page.getByTestId('logs');
      await logs.getByText('first line').waitFor();
      await hosting.appendLogs(address, [
        { time: new Date(), level: 'erro', type: 'execution', entry: 'ZeroDivisionError: oops' },
      ]);
      await logs.locator('li.log-erro').getByText('ZeroDivisionError: oops').waitFor();
      assert.equal(await logs.locator('li').count(), 2);

      await page.getByRole('button', { name: 'Clear logs' }).click();
      await page.getByTestId('no-logs').waitFor();
      const latest = await call(t.url, 'GET', `/v1/hosting/agents/${address}/logs/latest`, { key });
      assert.deepEqual(latest.body, []);

      // Deleted after a confirmation: back to the list, and gone from the API.
      await page.getByRole('button', { name: 'Delete hosted agent…' }).click();
      await page.getByRole('button', { name: 'Delete hosted agent', exact: true }).click();
      await page.getByText('No hosted agents yet').waitFor();
      const gone = await call(t.url, 'GET', `/v1/hosting/agents/${address}`, { key });
      assert.equal(gone.status, 404, gone.text);
      assert.deepEqual(problems, []);
    },
  );

  it('creates hosted agents for the team chosen under Acting as', opts, async () => {
    const key = await t.addUser(`teamhost-${dialect}`);
    const slug = `hosts-${dialect}`;
    const team = await call(t.url, 'POST', '/v2/teams', { key, body: { slug } });
    assert.equal(team.status, 201, team.text);
    const { page, problems } = await openConsole(key, '#/hosted');
    await page.getByText('No hosted agents yet').waitFor();
    await page.getByLabel('Acting as').selectOption(slug);
    await page.getByText('No hosted agents yet').waitFor();
    await page.getByLabel('New agent name').fill('team bot');
    await page.getByRole('button', { name: 'Create hosted agent' }).click();
    await page.getByTestId('hosted-name').getByText('team bot').waitFor();

    const asTeam = await call(t.url, 'GET', '/v1/hosting/agents', {
      key,
      headers: { 'x-team': slug },
    });
    assert.deepEqual(
      asTeam.body.items.map((a: { name: string }) => a.name),
      ['team bot'],
    );
    const own = await call(t.url, 'GET', '/v1/hosting/agents', { key });
    assert.deepEqual(own.body.items, []);
    assert.deepEqual(problems, []);
  });
  it('Start saves the code in the editor first, then starts the agent with it', opts, async () => {
    const key = await t.addUser(`starter-${dialect}`);
    const { page, problems } = await openConsole(key, '#/hosted');
    await page.getByLabel('New agent name').fill('eager bot');
    await page.getByRole('button', { name: 'Create hosted agent' }).click();
    await page.getByTestId('code-state').getByText('Saved', { exact: true }).waitFor();
    const address = decodeURIComponent(new URL(page.url()).hash.replace('#/hosted/', ''));

    await typeInto(page, 'agent.py', AGENT_PY);
    await page.getByText('Unsaved changes').waitFor();
    await page.getByRole('button', { name: 'Start', exact: true }).click();
    await page.getByTestId('code-state').getByText('Saved', { exact: true }).waitFor();
    await page
      .getByTestId('hosted-state')
      .getByText(/^Waiting for a runner/)
      .waitFor();

    const code = await call(t.url, 'GET', `/v1/hosting/agents/${address}/code`, { key });
    assert.deepEqual(JSON.parse(code.body.code), [
      { name: 'agent.py', language: 'python', value: AGENT_PY },
    ]);
    const started = await hosted(key, address);
    assert.equal(started.running, true);
    assert.equal(started.code_digest, code.body.digest);
    assert.equal(await page.getByRole('alert').count(), 0, 'no error beside Start');
    assert.deepEqual(problems, []);
  });

  // Last: a runner said to be alive makes the server ready for the tests after it.
  it(
    'says before the first agent whether hosted agents can run here, and the setting that lets them',
    opts,
    async () => {
      const key = await t.addUser(`ready-${dialect}`);
      const { page, problems } = await openConsole(key, '#/hosted');
      await page.getByText('No hosted agents yet').waitFor();
      const status = page.getByTestId('hosting-status');
      await status.waitFor();
      assert.equal(await status.getAttribute('data-ready'), 'false');
      assert.match(
        (await status.textContent()) ?? '',
        /^Hosted agents cannot run on this server yet: AGENTRY_HOSTING_PYTHON is not set\./,
      );
      assert.equal(
        await page.getByTestId('hosting-enable').textContent(),
        'AGENTRY_HOSTING_PYTHON=<a Python with uagents installed>',
      );
      await page.getByRole('button', { name: 'Copy command' }).waitFor();

      // A runner (an `agentry runner` on another machine, say) is alive: now they can.
      await t.server.ctx.services.hosting.heartbeat(`runner-${dialect}`, 'elsewhere', 10);
      await page.reload();
      const ready = page.locator('[data-testid="hosting-status"][data-ready="true"]');
      await ready.getByText('Hosted agents run on this server.').waitFor();
      assert.equal(await page.getByTestId('hosting-enable').count(), 0);
      assert.deepEqual(problems, []);
    },
  );
});
