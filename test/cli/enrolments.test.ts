import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentryArgs, repositoryRoot, runAgentry } from '../kit/process.js';
import { TestIdentity } from '../kit/uagent.js';

function lastLine(text: string): string {
  return text.trimEnd().split('\n').at(-1) ?? '';
}

describe('command line: agent provisioning and scoped keys', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentry-cli-'));
  const db = ['--data-dir', dir];
  const publicUrl = { AGENTRY_PUBLIC_URL: 'https://agentry.example.com' };
  after(() => rmSync(dir, { recursive: true, force: true }));
  before(() => {
    // Admin commands never create a database: the server (or migrate) does.
    const migrated = runAgentry(['migrate', ...db]);
    assert.equal(migrated.code, 0, migrated.stderr);
  });

  it('provisions an agent and prints its Agent URI last, with a key it made', () => {
    assert.equal(runAgentry(['users', 'add', 'dana', ...db]).code, 0);
    const res = runAgentry(['agents', 'provision', 'dana', '--name', 'Helper', ...db], publicUrl);
    assert.equal(res.code, 0, res.stderr);
    const uri = lastLine(res.stdout);
    const match =
      /^https:\/\/(helper-[a-z2-7]{6}):([0-9a-f]{64})@agentry\.example\.com\/Helper$/.exec(uri);
    assert.ok(match, uri);
    const address = TestIdentity.fromSeed(match[2]!, 0).address;
    assert.match(res.stdout, new RegExp(`enrolled ${address} \\(handle ${match[1]}\\) to dana`));
    const listed = runAgentry(['agents', 'enrolments', 'dana', ...db]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, new RegExp(`^${address}\\tHelper\\t${match[1]}\\t`, 'm'));
    assert.ok(!listed.stdout.includes(match[2]!));
  });

  it('takes a seed from standard input, and refuses one a URI cannot carry', () => {
    const seed = 'dana-own-seed-0123456789';
    const run = (input: string) =>
      spawnSync(
        process.execPath,
        agentryArgs(
          'agents',
          'provision',
          'dana',
          '--name',
          'Own',
          '--handle',
          'dana-own',
          '--seed-stdin',
          ...db,
        ),
        {
          cwd: repositoryRoot,
          encoding: 'utf8',
          input: `${input}\n`,
          env: { ...process.env, ...publicUrl },
        },
      );
    const res = run(seed);
    assert.equal(res.status, 0, res.stderr);
    assert.equal(lastLine(res.stdout), `https://dana-own:${seed}@agentry.example.com/Own`);
    assert.match(res.stdout, new RegExp(TestIdentity.fromSeed(seed).address));
    const bad = run('has spaces in it, sadly');
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /16 to 128 letters/);
  });

  it('adds read-only and agent-limited keys and lists their scope', () => {
    const agent = TestIdentity.random().address;
    const added = runAgentry(['keys', 'add', 'dana', '--read-only', '--agent', agent, ...db]);
    assert.equal(added.code, 0, added.stderr);
    assert.match(added.stdout, new RegExp(`scope read-only agents:${agent}`));
    const keyId = lastLine(added.stdout).split('_')[1]!;
    const listed = runAgentry(['keys', 'list', 'dana', ...db]);
    assert.match(listed.stdout, new RegExp(`^${keyId}\\t.*\\tread-only agents:${agent}$`, 'm'));
    assert.match(listed.stdout, /\tfull$/m);
    const bad = runAgentry(['keys', 'add', 'dana', '--agent', 'agent1nope', ...db]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /not an agent address/);
  });
});
