import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/index.js';
import { userAddressOf } from '../../src/crypto/index.js';
import { createLogger } from '../../src/logger.js';
import { Server } from '../../src/server.js';
import { call } from '../kit/http.js';
import { runAgentry } from '../kit/process.js';

function lastLine(text: string): string {
  return text.trimEnd().split('\n').at(-1) ?? '';
}

describe('command line: users and keys', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentry-cli-'));
  const db = ['--data-dir', dir];
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('never creates a database: only migrate (or serve) does', () => {
    const refused = runAgentry(['users', 'add', 'bob', ...db]);
    assert.equal(refused.code, 2);
    assert.match(
      refused.stderr,
      /^agentry: there is no database at .*agentry\.db\. Run this from the directory where the server runs/,
    );
    assert.doesNotMatch(refused.stderr, /\n\s+at /, 'no stack trace');
    assert.deepEqual(readdirSync(dir), []);
    const migrated = runAgentry(['migrate', ...db]);
    assert.equal(migrated.code, 0, migrated.stderr);
    assert.match(migrated.stdout, /^applied \d+ migrations, now at \d{4}_/);
  });

  it('adds a user and prints its key alone on the last line', () => {
    const res = runAgentry(['users', 'add', 'bob', ...db]);
    assert.equal(res.code, 0, res.stderr);
    assert.match(lastLine(res.stdout), /^agy_[a-z2-7]{12}_[A-Za-z0-9_-]{43}$/);
  });

  it('lists each user with the user1… address they send messages from', () => {
    const res = runAgentry(['users', 'list', ...db]);
    assert.equal(res.code, 0, res.stderr);
    assert.equal(res.stdout.split('\n')[0], 'name\tid\tcreated\taddress');
    const bob = res.stdout.split('\n').find((line) => line.startsWith('bob\t'));
    const json = runAgentry(['users', 'list', '--json', ...db]);
    const users = json.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { name: string; address: string });
    assert.equal(users.find((u) => u.name === 'bob')!.address, bob!.split('\t')[3]);
    const [, id, , address] = bob!.split('\t');
    assert.equal(address, userAddressOf(id!));
    assert.match(address!, /^user1[02-9ac-hj-np-z]{58}$/);
  });

  it('refuses a duplicate user name with a sentence and exit code 2', () => {
    const res = runAgentry(['users', 'add', 'bob', ...db]);
    assert.equal(res.code, 2);
    assert.match(res.stderr, /already exists/);
  });

  it('adds, lists and revokes keys', () => {
    const added = runAgentry(['keys', 'add', 'bob', '--expires', '30d', ...db]);
    assert.equal(added.code, 0, added.stderr);
    const token = lastLine(added.stdout);
    const keyId = token.split('_')[1]!;
    const listed = runAgentry(['keys', 'list', 'bob', ...db]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, new RegExp(`^${keyId}\\t`, 'm'));
    const revoked = runAgentry(['keys', 'revoke', keyId, ...db]);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.match(
      runAgentry(['keys', 'list', 'bob', ...db]).stdout,
      new RegExp(`^${keyId}\\t.*\\t\\d{4}-.*\\t\\d{4}-`, 'm'),
    );
    assert.equal(runAgentry(['keys', 'revoke', keyId, ...db]).code, 2);
  });

  it('rejects an unparseable duration', () => {
    const res = runAgentry(['keys', 'add', 'bob', '--expires', 'soon', ...db]);
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /duration/);
  });

  it("sets a user's limits one at a time and prints the effective ones, which the API reports", async () => {
    const limits = (args: string[], env: Record<string, string> = {}) => {
      const res = runAgentry(['users', 'limits', 'bob', ...args, ...db], env);
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

    const key = lastLine(runAgentry(['keys', 'add', 'bob', ...db]).stdout);
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
    const unknown = runAgentry(['users', 'limits', 'nobody', '--agents', '5', ...db]);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /No user named "nobody"/);
    const notANumber = runAgentry(['users', 'limits', 'bob', '--agents', 'many', ...db]);
    assert.notEqual(notANumber.code, 0);
    assert.match(notANumber.stderr, /whole number/);
  });
});
