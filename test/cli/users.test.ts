import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import { loadConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/logger.js';
import { Server } from '../../src/server.js';
import { call } from '../kit/http.js';
import { spawnServer } from '../kit/process.js';
import { TestIdentity } from '../kit/uagent.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const entry = join(root, 'src/cli/main.ts');

function agentry(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, ['--import', 'tsx', entry, ...args], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, ...env },
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

function lastLine(text: string): string {
  return text.trimEnd().split('\n').at(-1) ?? '';
}

describe('command line', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentry-cli-'));
  const db = ['--data-dir', dir];
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('adds a user and prints its key alone on the last line', () => {
    const res = agentry(['users', 'add', 'bob', ...db]);
    assert.equal(res.code, 0, res.stderr);
    assert.match(lastLine(res.stdout), /^agy_[a-z2-7]{12}_[A-Za-z0-9_-]{43}$/);
  });

  it('refuses a duplicate user name with a sentence and exit code 2', () => {
    const res = agentry(['users', 'add', 'bob', ...db]);
    assert.equal(res.code, 2);
    assert.match(res.stderr, /already exists/);
  });

  it('adds, lists and revokes keys', () => {
    const added = agentry(['keys', 'add', 'bob', '--expires', '30d', ...db]);
    assert.equal(added.code, 0, added.stderr);
    const token = lastLine(added.stdout);
    const keyId = token.split('_')[1]!;
    const listed = agentry(['keys', 'list', 'bob', ...db]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, new RegExp(`^${keyId}\\t`, 'm'));
    const revoked = agentry(['keys', 'revoke', keyId, ...db]);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.match(
      agentry(['keys', 'list', 'bob', ...db]).stdout,
      new RegExp(`^${keyId}\\t.*\\t\\d{4}-.*\\t\\d{4}-`, 'm'),
    );
    assert.equal(agentry(['keys', 'revoke', keyId, ...db]).code, 2);
  });

  it('rejects an unparseable duration', () => {
    const res = agentry(['keys', 'add', 'bob', '--expires', 'soon', ...db]);
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /duration/);
  });

  it("sets a user's limits one at a time and prints the effective ones, which the API reports", async () => {
    const limits = (args: string[], env: Record<string, string> = {}) => {
      const res = agentry(['users', 'limits', 'bob', ...args, ...db], env);
      assert.equal(res.code, 0, res.stderr);
      return Object.fromEntries(
        res.stdout
          .trimEnd()
          .split('\n')
          .map((line) => line.split('\t')),
      );
    };
    const defaults = {
      agents: '1000',
      messages: '1000000',
      'bytes-stored': '1073741824',
      'bytes-transferred': '10737418240',
    };
    assert.deepEqual(limits([]), defaults);
    assert.deepEqual(limits(['--agents', '5']), { ...defaults, agents: '5' });
    assert.deepEqual(
      limits(['--bytes-stored', '2048'], { AGENTRY_QUOTA_MESSAGES_PER_MONTH: '77' }),
      {
        ...defaults,
        agents: '5',
        messages: '77',
        'bytes-stored': '2048',
      },
    );

    const key = lastLine(agentry(['keys', 'add', 'bob', ...db]).stdout);
    const server = await Server.create(
      loadConfig(
        {
          databaseUrl: `sqlite:${join(dir, 'agentry.db')}`,
          port: 0,
          host: '127.0.0.1',
          logLevel: 'silent',
        },
        {},
      ),
      { overrides: { logger: createLogger({ level: 'silent' }) } },
    );
    try {
      const url = await server.start();
      const usage = await call(url, 'GET', '/v2/agents/usage/current', { key });
      assert.equal(usage.status, 200, usage.text);
      assert.equal(usage.body.num_agents_limit, 5);
      assert.equal(usage.body.bytes_stored_limit, 2048);
      assert.equal(usage.body.num_messages_limit, 1_000_000);
    } finally {
      await server.close();
    }
  });

  it('refuses limits for an unknown user or a value that is not a whole number', () => {
    const unknown = agentry(['users', 'limits', 'nobody', '--agents', '5', ...db]);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /No user named "nobody"/);
    const notANumber = agentry(['users', 'limits', 'bob', '--agents', 'many', ...db]);
    assert.notEqual(notANumber.code, 0);
    assert.match(notANumber.stderr, /whole number/);
  });

  it('migrates on request and says when nothing is left to do', () => {
    const res = agentry(['migrate', ...db]);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /up to date|applied/);
  });

  it('stops at start with a sentence naming the setting when configuration is wrong', () => {
    const res = agentry(['migrate'], { AGENTRY_DATABASE_URL: 'mysql://nope' });
    assert.equal(res.code, 2);
    assert.match(res.stderr, /AGENTRY_DATABASE_URL must start with sqlite:/);
  });

  it('serves on first start with a printed key that works, and stops cleanly on SIGTERM', async () => {
    const fresh = mkdtempSync(join(tmpdir(), 'agentry-serve-'));
    const server = await spawnServer(['--data-dir', fresh]);
    try {
      assert.ok(server.bootstrapKey, 'the first start prints a key');
      assert.equal((await call(server.url, 'GET', '/health')).status, 200);
      const agent = TestIdentity.random();
      const challenge = await call(server.url, 'GET', `/v2/identity/${agent.address}/challenge`, {
        key: server.bootstrapKey,
      });
      assert.equal(challenge.status, 200);
      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0);
    } finally {
      server.child.kill('SIGKILL');
      rmSync(fresh, { recursive: true, force: true });
    }
  });

  it('prints readable log lines on a terminal, with the first-start key on its own', async () => {
    const fresh = mkdtempSync(join(tmpdir(), 'agentry-tty-'));
    const command = [process.execPath, '--import', 'tsx', entry, 'serve', '--data-dir', fresh]
      .concat(['--port', '0', '--host', '127.0.0.1'])
      .map((arg) => `'${arg}'`)
      .join(' ');
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([name]) => !name.startsWith('AGENTRY_')),
    );
    // script(1) runs the server under a pseudo-terminal, as a person starting it would.
    const child = spawn('script', ['-qfec', command, '/dev/null'], { cwd: root, env });
    let out = '';
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no listening line:\n${out}`)), 30_000);
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (/agentry listening/.test(out)) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      const text = stripVTControlCharacters(out);
      assert.match(text, /^\s+agy_[a-z2-7]{12}_[A-Za-z0-9_-]{43}\r?$/m, 'the key stands alone');
      assert.match(text, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: agentry listening/m);
      assert.doesNotMatch(text, /"level":/, 'no JSON lines');
    } finally {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
      rmSync(fresh, { recursive: true, force: true });
    }
  });
});
