import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { messageUuid } from '../../src/services/mailbox.js';
import { registerAgent } from '../kit/agents.js';
import { createTestDatabase, testPgUrl } from '../kit/databases.js';
import { dialects } from '../kit/dialects.js';
import { freePort } from '../kit/ports.js';
import { call } from '../kit/http.js';
import { mcpClient } from '../kit/mcp.js';
import { agentryArgs, ChildRun, runAgentry, runAgentryInBackground } from '../kit/process.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/**
 * What a person meets in the first hour: help, the start-up block, the mistakes they can make
 * at start and in a command (each answered in a sentence, without a stack trace), and the
 * commands that read agents and the service's state, each listing scriptable with --json.
 */

/** The environment of a person's shell: no AGENTRY_* settings of the test run. */
function plainEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...Object.fromEntries(
      Object.entries(process.env).filter(([name]) => !name.startsWith('AGENTRY_')),
    ),
    ...extra,
  };
}

const NO_STACK = /\n\s+at /;

describe('command line: the first hour', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentry-first-'));
  const db = ['--data-dir', dir];
  let server: ChildRun;
  let url: string;
  let key: string;

  before(async () => {
    // As a person starts it: no --host, so the default applies.
    server = ChildRun.node(
      'agentry serve',
      agentryArgs('serve', '--data-dir', dir, '--port', '0'),
      plainEnv({ AGENTRY_LOG_FORMAT: 'json', AGENTRY_DRAIN_SECONDS: '0' }),
    );
    [, url] = (await server.waitForOutput(/"address":"(http:\/\/[^"]+)"/, 30_000)) as [
      string,
      string,
    ];
    key = /^\s+(agy_\S+)$/m.exec(server.stdout())![1]!;
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a bare agentry prints help and starts nothing', () => {
    const res = runAgentry([]);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /^Usage: agentry /);
    assert.match(res.stdout, /serve .*run the HTTP service/);
    assert.match(res.stdout, /status/);
    assert.match(res.stdout, /agents/);
  });

  it('a mistyped command is named, with the command meant and where help is', () => {
    const res = runAgentry(['user', 'list']);
    assert.equal(res.code, 2, res.stderr);
    assert.match(res.stderr, /unknown command 'user'/);
    assert.match(res.stderr, /Did you mean users\?/);
    assert.match(res.stderr, /agentry --help/);
    assert.doesNotMatch(res.stderr, /too many arguments/);
  });

  it('starts with one block: console, API docs, database, migrations in a line, the key, the loopback hint', () => {
    const out = server.stdout();
    const base = url.replace(/\/$/, '');
    assert.match(base, /^http:\/\/127\.0\.0\.1:\d+$/, 'listens on loopback by default');
    assert.match(out, new RegExp(`Agentry is running on ${base} \\(this machine only\\)`));
    assert.ok(out.includes(`  Console    ${base}/\n`), out);
    assert.ok(out.includes(`  API docs   ${base}/docs\n`), out);
    assert.match(
      out,
      new RegExp(
        `  Database   SQLite ${join(dir, 'agentry.db')} \\(migrated: \\d+ migrations applied, now at \\d{4}_\\w+\\)`,
      ),
    );
    assert.match(out, /First start: created user "admin"/);
    assert.match(out, /start with --host 0\.0\.0\.0/);
    // The migrations in one line of the log, not one line each.
    const migrated = out.split('\n').filter((line) => line.includes('"msg":"database migrated"'));
    assert.equal(migrated.length, 1);
    assert.match(migrated[0]!, /"applied":\d+,"latest":"\d{4}_\w+"/);
  });

  it('the console and the API docs are where the block says', async () => {
    const docs = await fetch(`${url}/docs`, { redirect: 'manual' });
    assert.ok(docs.status < 400, String(docs.status));
    const health = await call(url, 'GET', '/health');
    assert.equal(health.status, 200);
  });

  it('refuses a second server on the same SQLite file with a sentence', async () => {
    const second = await runAgentryInBackground(['serve', ...db, '--port', '0'], {
      AGENTRY_LOG_FORMAT: 'json',
    });
    assert.equal(second.code, 2, second.output);
    assert.match(second.output, /another Agentry server is already serving .*agentry\.db/);
    assert.match(second.output, /use PostgreSQL/);
    assert.doesNotMatch(second.output, NO_STACK);
    // The first still serves, and admin commands still work beside it.
    assert.equal((await call(url, 'GET', '/health')).status, 200);
    const users = await runAgentryInBackground(['users', 'list', ...db]);
    assert.equal(users.code, 0, users.output);
  });

  it('says so when the port is in use, without a stack trace unless --debug', async () => {
    const port = new URL(url).port;
    const other = mkdtempSync(join(tmpdir(), 'agentry-port-'));
    try {
      const res = await runAgentryInBackground(['serve', '--data-dir', other, '--port', port], {
        AGENTRY_LOG_FORMAT: 'json',
        AGENTRY_LOG_LEVEL: 'info',
      });
      assert.equal(res.code, 2, res.output);
      assert.match(
        res.output,
        new RegExp(`agentry: port ${port} on 127\\.0\\.0\\.1 is already in use .*--port`),
      );
      assert.doesNotMatch(res.output, NO_STACK);
      const debug = await runAgentryInBackground(
        ['serve', '--data-dir', other, '--port', port, '--debug'],
        { AGENTRY_LOG_FORMAT: 'json' },
      );
      assert.equal(debug.code, 2);
      assert.match(debug.output, /EADDRINUSE/);
      assert.match(debug.output, NO_STACK);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('says so when PostgreSQL does not answer or refuses, without warnings or stack traces', async () => {
    const unreachable = await runAgentryInBackground(
      ['serve', '--database-url', 'postgres://postgres@127.0.0.1:1/none', '--port', '0'],
      { AGENTRY_LOG_FORMAT: 'json' },
    );
    assert.equal(unreachable.code, 2, unreachable.output);
    assert.match(
      unreachable.output,
      /^agentry: cannot reach the database at postgres:\/\/postgres@127\.0\.0\.1:1\/none \(ECONNREFUSED\)\. Is PostgreSQL running there\?/,
    );
    assert.doesNotMatch(unreachable.output, /mailbox notifications/);
    assert.doesNotMatch(unreachable.output, NO_STACK);
    const admin = runAgentry([
      'users',
      'list',
      '--database-url',
      'postgres://postgres@127.0.0.1:1/none',
    ]);
    assert.equal(admin.code, 2);
    assert.match(admin.stderr, /cannot reach the database/);
  });

  it('says so when PostgreSQL answers but has no such database', { skip: !testPgUrl }, async () => {
    const url = new URL(testPgUrl!);
    url.pathname = '/agentry_no_such_database';
    const res = runAgentry(['users', 'list', '--database-url', url.href]);
    assert.equal(res.code, 2, res.stderr);
    assert.match(res.stderr, /database "agentry_no_such_database" does not exist .*Create it/);
    assert.doesNotMatch(res.stderr, NO_STACK);
  });

  it('an admin command from another directory says where the database is expected and creates nothing', async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'agentry-elsewhere-'));
    try {
      const child = ChildRun.node(
        'agentry users list',
        agentryArgs('users', 'list'),
        plainEnv(),
        elsewhere,
      );
      assert.equal(await child.waitForExit(), 2);
      assert.match(
        child.output(),
        /there is no database at .*data\/agentry\.db\. Run this from the directory where the server runs/,
      );
      assert.deepEqual(readdirSync(elsewhere), []);
      assert.ok(!existsSync(join(elsewhere, 'data')));
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it('agents list, show, mailbox and timeline, each scriptable with --json', async () => {
    const agent = TestIdentity.random();
    await registerAgent({ url }, key, agent, { listing: { name: 'Mail Agent' } });
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target: agent.address, payloadJson: '{}' }),
    );
    assert.equal(
      (await call(url, 'POST', '/v2/agents/mailbox/submit', { body: envelope })).status,
      200,
    );

    const list = await runAgentryInBackground(['agents', 'list', ...db]);
    assert.equal(list.code, 0, list.output);
    const [header, row] = list.output.split('\n');
    assert.equal(header, 'address\tname\towner\tstatus\tlast_seen');
    assert.deepEqual(row!.split('\t').slice(0, 3), [agent.address, 'Mail Agent', 'admin']);

    const show = await runAgentryInBackground(['agents', 'show', agent.address, '--json', ...db]);
    assert.equal(show.code, 0, show.output);
    const shown = JSON.parse(show.output) as Record<string, unknown>;
    assert.equal(shown.address, agent.address);
    assert.equal(shown.owner, 'admin');
    assert.equal(shown.pending_messages, 1);
    const showText = await runAgentryInBackground(['agents', 'show', agent.address, ...db]);
    assert.match(showText.output, /^name +Mail Agent$/m);

    const mailbox = await runAgentryInBackground(['agents', 'mailbox', agent.address, ...db]);
    assert.equal(mailbox.code, 0, mailbox.output);
    const lines = mailbox.output.split('\n');
    assert.equal(lines[0], 'uuid\tsender\tsize\treceived\texpires');
    assert.deepEqual(lines[1]!.split('\t').slice(0, 2), [messageUuid(envelope), sender.address]);
    const mailboxJson = await runAgentryInBackground([
      'agents',
      'mailbox',
      agent.address,
      '--json',
      ...db,
    ]);
    assert.equal((JSON.parse(mailboxJson.output) as { sender: string }).sender, sender.address);

    const timeline = await runAgentryInBackground([
      'agents',
      'timeline',
      agent.address,
      '--json',
      ...db,
    ]);
    assert.equal(timeline.code, 0, timeline.output);
    const kinds = timeline.output
      .split('\n')
      .map((line) => (JSON.parse(line) as { kind: string }).kind);
    assert.ok(kinds.includes('message.stored'), kinds.join(','));

    const unknown = await runAgentryInBackground([
      'agents',
      'show',
      TestIdentity.random().address,
      ...db,
    ]);
    assert.equal(unknown.code, 2);
    assert.match(unknown.output, /is registered here; "agentry agents list"/);
    const empty = await runAgentryInBackground([
      'agents',
      'list',
      '--user',
      'admin',
      '--json',
      ...db,
    ]);
    assert.equal(empty.code, 0);
  });

  it('status summarises the running service, and says when it does not answer', async () => {
    const res = await runAgentryInBackground(['status', '--url', url, '--json', ...db]);
    assert.equal(res.code, 0, res.output);
    const status = JSON.parse(res.output) as {
      server: { answers: boolean };
      agents: { total: number };
      pending_messages: number;
      failures_last_hour: { total: number };
    };
    assert.equal(status.server.answers, true);
    assert.ok(status.agents.total >= 1);
    assert.ok(status.pending_messages >= 1);
    assert.equal(typeof status.failures_last_hour.total, 'number');
    // An assistant connected through MCP is counted.
    const opened = await mcpClient(url, key);
    const withMcp = await runAgentryInBackground(['status', '--url', url, '--json', ...db]);
    await opened.client.close();
    const counted = JSON.parse(withMcp.output) as { mcp_sessions: { open: number } };
    assert.ok(counted.mcp_sessions.open >= 1, withMcp.output);
    const text = await runAgentryInBackground(['status', '--url', url, ...db]);
    assert.match(text.output, /^server +http:\/\/127\.0\.0\.1:\d+: ready$/m);
    assert.match(
      text.output,
      /^agents +\d+ \(\d+ active, \d+ idle, \d+ unreachable, \d+ failing, \d+ offline\)$/m,
    );
    assert.match(text.output, /^pending messages +\d+/m);
    assert.match(text.output, /^MCP sessions +\d+ open \(\d+ used in the last hour\)$/m);
    // The instance's identity, from the running server; no peers here.
    assert.match(text.output, /^federation +instance agent1[0-9a-z]+; 0 published agents$/m);
    assert.match(text.output, /^ {2}from afar no look-ups answered from afar$/m);
    const down = await runAgentryInBackground(['status', '--url', 'http://127.0.0.1:1', ...db]);
    assert.equal(down.code, 3);
    assert.match(down.output, /does not answer \(is "agentry serve" running\?\)/);
  });

  it('status finds the server this database serves, whatever its port, and not once it stops', async () => {
    for (const dialect of dialects) {
      const database = await createTestDatabase(dialect);
      const store = ['--database-url', database.url];
      const port = await freePort();
      // Not the default port, nor the public URL's: only the database says where it listens.
      const serving = ChildRun.node(
        'agentry serve',
        agentryArgs('serve', ...store, '--port', String(port)),
        plainEnv({ AGENTRY_LOG_FORMAT: 'json', AGENTRY_DRAIN_SECONDS: '0' }),
      );
      try {
        await serving.waitForOutput(/"msg":"agentry listening"/, 30_000);
        const res = await runAgentryInBackground(['status', '--json', ...store], {
          AGENTRY_PUBLIC_URL: 'http://127.0.0.1:1',
        });
        assert.equal(res.code, 0, `${dialect}: ${res.output}`);
        const status = JSON.parse(res.stdout) as {
          server: { url: string; answers: boolean };
          servers: { url: string }[];
        };
        assert.deepEqual(status.server, {
          url: `http://127.0.0.1:${port}`,
          answers: true,
          detail: 'ready',
        });
        assert.equal(status.servers.length, 1);
        const text = await runAgentryInBackground(['status', ...store]);
        assert.match(
          text.output,
          new RegExp(`^server +http://127\\.0\\.0\\.1:${port}: ready$`, 'm'),
        );
        await serving.stop();
        const stopped = await runAgentryInBackground(['status', '--json', ...store], {
          AGENTRY_PUBLIC_URL: 'http://127.0.0.1:1',
        });
        assert.equal(stopped.code, 3, `${dialect}: ${stopped.output}`);
        assert.equal(
          (JSON.parse(stopped.stdout) as { server: { url: string } }).server.url,
          'http://127.0.0.1:1',
        );
      } finally {
        await serving.stop();
        await database.drop();
      }
    }
  });

  it('keys list has a header and --json', async () => {
    const listed = await runAgentryInBackground(['keys', 'list', 'admin', ...db]);
    assert.equal(listed.output.split('\n')[0], 'id\tcreated\texpires\trevoked\tscope');
    const json = await runAgentryInBackground(['keys', 'list', 'admin', '--json', ...db]);
    const keys = json.output.split('\n').map((line) => JSON.parse(line) as { id: string });
    assert.ok(keys.some((k) => key.includes(k.id)));
  });
});
