import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import type { Browser } from 'playwright-core';
import { browserSkipReason, ensureWebBuild, launchBrowser, watchPage } from '../kit/browser.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';
import { freePort } from '../kit/ports.js';
import { runAgentryInBackground } from '../kit/process.js';
import { agentServerUp, realClient, waitFor } from '../kit/real-client.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/**
 * What Agentry says of an unmodified uAgents 0.25.5 mailbox agent (docs/activity.md,
 * "Status"): running with nothing to do, it is idle or active, never unreachable; killed with
 * SIGKILL while messages wait for it, it is unreachable within 20 seconds, in the API, the
 * command line and the console, with one webhook and one warning in the log. It runs with the
 * interpreter AGENTRY_TEST_PYTHON names and skips, saying so, where that cannot import uagents
 * 0.25.
 */
const { python, skip } = realClient('AGENTRY_TEST_PYTHON', { series: '0.25', fallback: 'python3' });

/** The agent: it prints each Ping it hears as a JSON line. */
const AGENT_SCRIPT = `
import json, sys
from uagents import Agent, Context, Model

agentverse, port, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3]

class Ping(Model):
    text: str

agent = Agent(name="mortal", seed=seed, port=port, mailbox=True, agentverse=agentverse)

@agent.on_message(Ping)
async def on_ping(ctx: Context, sender: str, msg: Ping):
    print(json.dumps({"received": msg.text}), flush=True)

print(json.dumps({"address": agent.address, "ping": Model.build_schema_digest(Ping)}), flush=True)
agent.run()
`;

/** How long after its death a mailbox agent with messages waiting must be unreachable. */
const WITHIN_MS = 20_000;

describeOnEachDialect('a real uAgents 0.25 mailbox agent, running and killed', (dialect) => {
  let t: TestServer | undefined;
  let dir: string;
  let child: ChildProcess | undefined;
  let browser: Browser | undefined;
  const log: Record<string, unknown>[] = [];
  const hooks: { kind: string; agent: string; data: Record<string, unknown> }[] = [];
  const receiver = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        kind: string;
        agent: string;
        entry: { data: Record<string, unknown> };
      };
      hooks.push({ kind: body.kind, agent: body.agent, data: body.entry.data });
      response.writeHead(200).end();
    });
  });
  let receiverUrl: string;

  before(async () => {
    if (skip) return;
    dir = mkdtempSync(join(tmpdir(), 'agentry-uagents-presence-'));
    receiverUrl = await listenOnLoopback(receiver);
    t = await startTestServer({
      dialect,
      logger: pino(
        { level: 'info' },
        { write: (line: string) => void log.push(JSON.parse(line) as Record<string, unknown>) },
      ),
      // Polls held as in production (20 s); webhooks to the receiver on loopback.
      config: { mailboxHoldSeconds: 20, allowPrivateTargets: true },
    });
    if (!browserSkipReason) {
      ensureWebBuild();
      browser = await launchBrowser();
    }
  });
  after(async () => {
    child?.kill('SIGKILL');
    await browser?.close();
    await t?.close();
    await closeNow(receiver);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it(
    'is idle or active while it runs with nothing to do, and unreachable within 20 s of a SIGKILL',
    { skip },
    async (test) => {
      const server = t!;
      const script = join(dir, 'mortal_agent.py');
      writeFileSync(script, AGENT_SCRIPT);
      const port = await freePort();
      const agentUrl = `http://127.0.0.1:${port}`;
      const lines: Record<string, unknown>[] = [];
      child = spawn(python!, [script, server.url, String(port), `mortal ${Math.random()}`], {
        cwd: dir,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let pending = '';
      child.stdout!.on('data', (chunk: Buffer) => {
        pending += chunk.toString();
        let newline: number;
        while ((newline = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, newline).trim();
          pending = pending.slice(newline + 1);
          if (line.startsWith('{')) lines.push(JSON.parse(line) as Record<string, unknown>);
        }
      });
      child.stderr!.resume();
      const first = await waitFor(() => lines[0], 'the agent to start');
      const address = first.address as string;
      await agentServerUp(agentUrl);
      // Connected as the inspector does it, through the agent's own /connect.
      const connected = await fetch(`${agentUrl}/connect`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ user_token: server.userKey, agent_type: 'mailbox' }),
      });
      assert.equal(connected.status, 200, await connected.clone().text());
      const sender = TestIdentity.random();
      let nonce = 0;
      const ping = (text: string) =>
        call(server.url, 'POST', '/v2/agents/mailbox/submit', {
          body: sender.signEnvelope(
            makeEnvelope({
              sender: sender.address,
              target: address,
              payloadJson: JSON.stringify({ text }),
              schemaDigest: first.ping as string,
              nonce: ++nonce,
            }),
          ),
        });
      const statusOf = async () => {
        const res = await call(server.url, 'GET', `/v2/agents/${address}`, {
          key: server.userKey,
        });
        assert.equal(res.status, 200, res.text);
        return res.body.status as { status: string; reason: string | null };
      };

      // It takes a message from its mailbox.
      assert.equal((await ping('hello')).status, 200);
      await waitFor(() => lines.find((line) => line.received === 'hello'), 'the agent to hear it');
      await waitFor(async () => {
        const { status } = await statusOf();
        return status === 'active' || status === 'idle' ? status : undefined;
      }, 'the agent to be seen working');
      // Its owner asks to be told of its status from now on.
      const hook = await call(server.url, 'POST', '/v2/webhooks', {
        key: server.userKey,
        body: {
          url: `${receiverUrl}/hook`,
          kinds: ['agent.unreachable', 'agent.silent', 'agent.back', 'agent.failing'],
        },
      });
      assert.equal(hook.status, 201, hook.text);

      // Running with nothing to do for longer than a held poll lasts (20 s): never unreachable.
      // With each status its reason, so that a failure says which rule answered.
      const seen = new Map<string, string | null>();
      const quietUntil = Date.now() + 25_000;
      while (Date.now() < quietUntil) {
        const { status, reason } = await statusOf();
        seen.set(status, reason);
        await sleep(500);
      }
      assert.ok(
        [...seen.keys()].every((status) => status === 'idle' || status === 'active'),
        [...seen].map(([status, reason]) => `${status} (${reason})`).join(', '),
      );

      // Killed: its held poll ends as its connection does; messages wait for it.
      child.kill('SIGKILL');
      const killedAt = Date.now();
      await sleep(500);
      for (const text of ['one', 'two']) assert.equal((await ping(text)).status, 200);
      const unreachable = await waitFor(
        async () => {
          const status = await statusOf();
          return status.status === 'unreachable' ? status : undefined;
        },
        'the killed agent to be unreachable',
        WITHIN_MS + 10_000,
      );
      const took = Date.now() - killedAt;
      test.diagnostic(`unreachable ${took} ms after SIGKILL`);
      assert.ok(took < WITHIN_MS, `unreachable after ${took} ms`);
      assert.equal(unreachable.reason, 'stopped polling its mailbox; 2 messages waiting');

      // The list says the same.
      const list = await call(server.url, 'GET', '/v2/agents', { key: server.userKey });
      const listed = (list.body as { address: string; status: { status: string } }[]).find(
        (agent) => agent.address === address,
      );
      assert.equal(listed?.status.status, 'unreachable');

      // So does the command line, reading the database.
      const cli = await runAgentryInBackground([
        'agents',
        'list',
        '--json',
        '--database-url',
        server.config.databaseUrl,
      ]);
      assert.equal(cli.code, 0, cli.output);
      const row = cli.output
        .trim()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .find((entry) => entry.address === address);
      assert.equal(row?.status, 'unreachable', cli.output);
      assert.equal(row?.reason, 'stopped polling its mailbox; 2 messages waiting');

      // One webhook, one warning.
      await waitFor(() => (hooks.length > 0 ? true : undefined), 'the webhook', 10_000);
      await sleep(2000);
      assert.deepEqual(
        hooks.map((h) => [h.kind, h.agent, h.data.from, h.data.to]),
        [['agent.unreachable', address, hooks[0]!.data.from as string, 'unreachable']],
      );
      assert.ok(
        ['idle', 'active'].includes(hooks[0]!.data.from as string),
        String(hooks[0]!.data.from),
      );
      const warnings = log.filter((line) => line.level === 40 && line.agent === address);
      assert.deepEqual(
        warnings.map((line) => [line.msg, line.to]),
        [['agent status changed', 'unreachable']],
      );

      // The console shows it in Chromium: counted in the heading, with the reason.
      if (browser) {
        const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
        const page = await context.newPage();
        const problems = watchPage(page);
        await page.goto(`${server.url}/`);
        await page.getByLabel('API key').fill(server.userKey);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.getByRole('heading', { name: /Agents\s+1 unreachable/ }).waitFor();
        const agentRow = page.getByTestId('agents').getByRole('row').filter({ hasText: address });
        assert.equal(await agentRow.locator('[data-status]').textContent(), '⊘ unreachable');
        await agentRow.getByText('stopped polling its mailbox; 2 messages waiting').waitFor();
        await page.getByLabel('Status').selectOption({ label: 'Unreachable' });
        assert.equal(await page.getByTestId('agents').locator('[data-status]').count(), 1);
        assert.deepEqual(problems, []);
        await context.close();
      }
    },
  );
});
