import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { version } from '../../src/version.js';
import { ensureWebBuild } from '../kit/browser.js';
import { call } from '../kit/http.js';
import { freePort } from '../kit/ports.js';
import {
  agentryArgs,
  ChildRun,
  ensureServerBuild,
  repositoryRoot,
  runAgentry,
  spawnServer,
} from '../kit/process.js';
import { registerAgent } from '../kit/agents.js';
import { TestIdentity } from '../kit/uagent.js';

describe('command line: serve and migrate', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentry-cli-'));
  const db = ['--data-dir', dir];
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('migrates on request and says when nothing is left to do', () => {
    const res = runAgentry(['migrate', ...db]);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /up to date|applied/);
  });

  it('stops at start with a sentence naming the setting when configuration is wrong', () => {
    const res = runAgentry(['migrate'], { AGENTRY_DATABASE_URL: 'mysql://nope' });
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

  it('serves, from its one file, the API document, the console and the docs page the sources serve', async () => {
    // dist/agentry.js joins the modules into one file: files found beside a module (the
    // console's pages, package.json, the docs page's assets) must still be found.
    ensureWebBuild();
    const fresh = mkdtempSync(join(tmpdir(), 'agentry-bundle-'));
    const server = await spawnServer(['--data-dir', fresh]);
    try {
      const spec = await call(server.url, 'GET', '/openapi.json');
      assert.equal(spec.status, 200);
      assert.equal(
        `${JSON.stringify(spec.body, null, 2)}\n`,
        readFileSync(join(repositoryRoot, 'test/fixtures/openapi.json'), 'utf8'),
      );
      assert.equal((spec.body as { info: { version: string } }).info.version, version);
      const page = await fetch(`${server.url}/`);
      assert.equal(page.status, 200);
      assert.match(await page.text(), /<html/i);
      const initializer = await fetch(`${server.url}/docs/static/swagger-initializer.js`);
      assert.equal(initializer.status, 200);
      assert.match(await initializer.text(), /validatorUrl: null/);
    } finally {
      server.child.kill('SIGKILL');
      rmSync(fresh, { recursive: true, force: true });
    }
  });

  it('says at the info level what happens to agents, and logs every request only when asked', async () => {
    for (const logRequests of [false, true]) {
      const fresh = mkdtempSync(join(tmpdir(), 'agentry-log-'));
      const server = await spawnServer([
        '--data-dir',
        fresh,
        ...(logRequests ? ['--log-requests'] : []),
      ]);
      try {
        const agent = TestIdentity.random();
        await registerAgent({ url: server.url }, server.bootstrapKey!, agent);
        const deleted = await call(server.url, 'DELETE', `/v2/agents/${agent.address}`, {
          key: server.bootstrapKey,
        });
        assert.equal(deleted.status, 200);
        const lines = () =>
          server.child
            .stdout()
            .split('\n')
            .filter((line) => line.startsWith('{'))
            .map((line) => JSON.parse(line) as { level: number; msg: string; agent?: string });
        // The request's own line comes after its answer, so after the line about the agent.
        await waitUntil(() =>
          lines().some((line) =>
            logRequests
              ? line.msg === 'request' && (line as { method?: string }).method === 'DELETE'
              : line.msg === 'agent deleted',
          ),
        );
        const about = lines().filter((line) => line.agent === agent.address);
        assert.deepEqual(
          about.map((line) => [line.level, line.msg]),
          [
            [30, 'agent registered'],
            [30, 'agent deleted'],
          ],
        );
        const requests = lines().filter((line) => line.msg === 'request');
        if (logRequests) {
          assert.ok(requests.length >= 4, JSON.stringify(requests));
          assert.ok(requests.every((r) => r.level === 30));
        } else assert.deepEqual(requests, []);
      } finally {
        server.child.kill('SIGKILL');
        rmSync(fresh, { recursive: true, force: true });
      }
    }
  });

  it('under npm start, tells a command to make more keys that runs as printed from the project', async () => {
    ensureServerBuild();
    const fresh = mkdtempSync(join(tmpdir(), 'agentry-npm-'));
    // The person's shell: no settings of the test run; the database and port by environment,
    // so that the printed command runs word for word against the same database.
    const env = {
      ...Object.fromEntries(
        Object.entries(process.env).filter(
          ([name]) => !name.startsWith('AGENTRY_') && !name.startsWith('npm_'),
        ),
      ),
      AGENTRY_DATABASE_URL: `sqlite:${join(fresh, 'agentry.db')}`,
      AGENTRY_PORT: String(await freePort()),
      AGENTRY_LOG_FORMAT: 'json',
      AGENTRY_DRAIN_SECONDS: '0',
    };
    // The start script itself (its build is already done, and tested on its own).
    const server = ChildRun.group('npm start', 'npm', ['start', '--ignore-scripts'], env);
    try {
      const [, printed] = (await server.waitForOutput(
        /Make more with "([^"]+ keys add admin)"/,
        60_000,
      )) as [string, string];
      const made = ChildRun.spawn(printed, 'bash', ['-c', printed], env);
      assert.equal(await made.waitForExit(), 0, `${printed}: ${made.output()}`);
      assert.match(made.stdout(), /^agy_\S+$/m);
    } finally {
      await server.stop();
      rmSync(fresh, { recursive: true, force: true });
    }
  });

  it('prints readable log lines on a terminal, with the first-start key on its own', async () => {
    const fresh = mkdtempSync(join(tmpdir(), 'agentry-tty-'));
    const command = [
      process.execPath,
      ...agentryArgs('serve', '--data-dir', fresh, '--port', '0', '--host', '127.0.0.1'),
    ]
      .map((arg) => `'${arg}'`)
      .join(' ');
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([name]) => !name.startsWith('AGENTRY_')),
    );
    // script(1) runs the server under a pseudo-terminal, as a person starting it would.
    const child = spawn('script', ['-qfec', command, '/dev/null'], { cwd: repositoryRoot, env });
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

async function waitUntil(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error('not logged in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
