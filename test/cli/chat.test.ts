import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { parseEvents, type ServerEvent } from '../../src/cli/server-api.js';
import { loadConfig } from '../../src/config/index.js';
import { hostOf } from '../kit/agents.js';
import { registerInAlmanac, unixSeconds } from '../kit/almanac.js';
import { startChatAgent } from '../kit/chat-agent.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { freePort } from '../kit/ports.js';
import { agentryArgs, ChildRun } from '../kit/process.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { TestIdentity } from '../kit/uagent.js';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** What `agentry chat` wrote on stderr: everything after its stdout. */
function stderrOf(child: ChildRun): string {
  const stdout = child.stdout();
  return child.output().slice(stdout.trim().length).trim();
}

/** No stack trace, no Node warning: only the command's own lines. */
function assertNoTrace(stderr: string): void {
  assert.doesNotMatch(stderr, /^\s+at |Error:|node:internal|EPIPE/m, stderr);
}

/** The session id `agentry chat` printed on stderr. */
function sessionOf(stderr: string): string {
  const match = /^session ([0-9a-f-]{36}) with agent1\w+ \(continue it with --session \1\)$/m.exec(
    stderr,
  );
  assert.ok(match, `a session line on stderr:\n${stderr}`);
  return match[1]!;
}

describe('command line: chat: Server-Sent Events', () => {
  it('reads events split anywhere, with any line ending, comments and several data lines', async () => {
    const text =
      'retry: 2000\n\n: keep-alive\n\nid: 7\r\nevent: message\r\ndata: {"a":1}\r\n\r\n' +
      'data: one\rdata:two\r\revent: end\ndata: {}\n\n';
    const bytes = new TextEncoder().encode(text);
    // Split at every byte: a CRLF and a character may arrive in two chunks.
    async function* chunks() {
      for (const byte of bytes) yield Uint8Array.of(byte);
    }
    const events: ServerEvent[] = [];
    for await (const event of parseEvents(chunks())) events.push(event);
    assert.deepEqual(events, [
      { event: 'message', id: '7', data: '{"a":1}' },
      { event: 'message', id: '7', data: 'one\ntwo' },
      { event: 'end', id: '7', data: '{}' },
    ]);
  });
});

describeOnEachDialect('command line: chat', (dialect) => {
  let t: TestServer;
  let echo: Awaited<ReturnType<typeof startChatAgent>>;
  let streamer: Awaited<ReturnType<typeof startChatAgent>>;
  let silent: Awaited<ReturnType<typeof startChatAgent>>;

  before(async () => {
    t = await startTestServer({
      dialect,
      config: {
        allowPrivateTargets: true,
        // Replicas share no key file: on PostgreSQL the operator names the sealing key.
        hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
      },
    });
    echo = await startChatAgent(hostOf(t), t.userKey, { kind: 'echo', prefix: 'echo: ' });
    streamer = await startChatAgent(hostOf(t), t.userKey, {
      kind: 'stream',
      chunks: ['Once ', 'upon ', 'a time'],
    });
    silent = await startChatAgent(hostOf(t), t.userKey, { kind: 'silent' });
  });
  after(async () => {
    await echo?.close();
    await streamer?.close();
    await silent?.close();
    await t?.close();
  });

  /**
   * Starts `agentry chat <args>` against the test server in a child process (this process
   * serves the server and the agents, so it must not block), with the user's key in the
   * environment unless `env` says otherwise.
   */
  const start = (args: string[], env: Record<string, string> = {}): ChildRun =>
    ChildRun.node('agentry chat', agentryArgs('chat', '--url', t.url, ...args), {
      ...process.env,
      AGENTRY_API_KEY: t.userKey,
      ...env,
    });
  const chat = async (args: string[], env: Record<string, string> = {}): Promise<Run> => {
    const child = start(args, env);
    const code = await child.waitForExit();
    return { code, stdout: child.stdout(), stderr: stderrOf(child) };
  };

  it('prints the reply and the session id, and continues the session with --session', async () => {
    const first = await chat([echo.address, 'hello', '--timeout', '20']);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.stdout, 'echo: hello\n');
    const id = sessionOf(first.stderr);
    assertNoTrace(first.stderr);

    const again = await chat(['--session', id, 'and again', '--timeout', '20']);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout, 'echo: and again\n', 'only the reply to this message');
    assert.equal(sessionOf(again.stderr), id);
    // The agent given with --session must be the session's.
    const same = await chat(['--session', id, echo.address, 'third', '--timeout', '20']);
    assert.equal(same.code, 0, same.stderr);
    assert.equal(same.stdout, 'echo: third\n');
    const other = await chat(['--session', id, streamer.address, 'fourth']);
    assert.equal(other.code, 2);
    assert.equal(
      other.stderr,
      `agentry: session ${id} is with ${echo.address}, not ${streamer.address}`,
    );

    const history = await call(t.url, 'GET', `/v2/chat/sessions/${id}/messages`, {
      key: t.userKey,
    });
    assert.deepEqual(
      history.body
        .filter((e: { kind: string }) => e.kind === 'message')
        .map((e: { direction: string; text: string }) => `${e.direction} ${e.text}`),
      [
        'out hello',
        'in echo: hello',
        'out and again',
        'in echo: and again',
        'out third',
        'in echo: third',
      ],
      'one session, continued',
    );
  });

  it('prints a streamed reply chunk by chunk, in order, on one line', async () => {
    const child = start([streamer.address, 'tell me a story', '--timeout', '20']);
    // What was printed at any moment is the story so far.
    const seen: string[] = [];
    while (!child.hasExited()) {
      const out = child.stdout();
      if (seen.at(-1) !== out) seen.push(out);
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    const code = await child.waitForExit();
    assert.equal(code, 0, stderrOf(child));
    assert.equal(child.stdout(), 'Once upon a time\n');
    for (const out of seen) {
      assert.ok(
        'Once upon a time\n'.startsWith(out),
        `a prefix of the story: ${JSON.stringify(out)}`,
      );
    }
  });

  it('prints each entry as one JSON line with --json, both ways, in order', async () => {
    const res = await chat([streamer.address, 'a story please', '--json', '--timeout', '20']);
    assert.equal(res.code, 0, res.stderr);
    assert.equal(res.stderr, '', 'the session id is in each line');
    const entries = res.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, any>);
    const sessionId = entries[0]!.session_id as string;
    assert.match(sessionId, /^[0-9a-f-]{36}$/);
    assert.ok(entries.every((e) => e.session_id === sessionId));
    assert.deepEqual(
      entries.map(
        (e) => `${e.kind} ${e.direction} ${e.content?.map((c: any) => c.type).join('+') ?? '-'}`,
      ),
      [
        'message out start-session+text',
        'acknowledgement in -',
        'message in start-stream',
        'message in text',
        'message in text',
        'message in text',
        'message in end-stream',
      ],
    );
    assert.deepEqual(
      entries.filter((e) => e.direction === 'in' && e.text).map((e) => e.text),
      ['Once ', 'upon ', 'a time'],
    );
    // Ids increase: the order the session keeps.
    const ids = entries.map((e) => Number(e.id));
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => a - b),
    );
  });

  it('ends quietly when a reader of --json stops early (| head -1)', async () => {
    const line = agentryArgs('chat', '--url', t.url, streamer.address, 'short', '--json')
      .map((arg) => `'${arg}'`)
      .join(' ');
    const child = ChildRun.spawn(
      'agentry chat | head -1',
      'bash',
      ['-c', `set -o pipefail; '${process.execPath}' ${line} | head -1`],
      { ...process.env, AGENTRY_API_KEY: t.userKey },
    );
    const code = await child.waitForExit();
    const stderr = stderrOf(child);
    assert.equal(code, 0, child.output());
    assert.equal(stderr, '');
    const lines = child.stdout().trim().split('\n');
    assert.equal(lines.length, 1);
    assert.equal(JSON.parse(lines[0]!).text, 'short');
  });

  it('keeps printing what the agent sends with --follow until interrupted', async () => {
    const child = start([echo.address, 'one', '--follow', '--timeout', '20']);
    await child.waitForOutput(/^echo: one\n$/, 20_000);
    // Whatever else comes in the session, sent from elsewhere, is printed too.
    const session = (
      await call(t.url, 'GET', `/v2/chat/sessions?agent=${echo.address}&limit=1`, {
        key: t.userKey,
      })
    ).body[0];
    const sent = await call(t.url, 'POST', `/v2/chat/sessions/${session.id}/messages`, {
      key: t.userKey,
      body: { text: 'two' },
    });
    assert.equal(sent.status, 201, sent.text);
    await child.waitForOutput(/^echo: one\necho: two\n$/, 20_000);
    assert.ok(!child.hasExited(), 'still following');
    child.kill('SIGINT');
    assert.equal(await child.waitForExit(), 0, child.output());
    assertNoTrace(stderrOf(child));
  });

  it('says in one sentence, exit code 2, that it does not know an agent', async () => {
    const unknown = TestIdentity.random().address;
    for (const agent of [unknown, 'nobody.agent']) {
      const res = await chat([agent, 'hello']);
      assert.equal(res.code, 2, res.stderr);
      assert.equal(res.stdout, '');
      assert.equal(res.stderr.split('\n').length, 1, res.stderr);
      assert.match(res.stderr, new RegExp(`^agentry: cannot open a session with ${agent}: .+`));
      assertNoTrace(res.stderr);
    }
  });

  it('gives up, exit code 4, when the agent says nothing within --timeout', async () => {
    const startedAt = Date.now();
    const res = await chat([silent.address, 'hello?', '--timeout', '1']);
    assert.equal(res.code, 4, res.stderr);
    assert.equal(res.stdout, '');
    const lines = res.stderr.split('\n');
    sessionOf(lines[0]!);
    assert.deepEqual(lines.slice(1), [`agentry: no reply from ${silent.address} within 1 second`]);
    assert.ok(Date.now() - startedAt < 15_000);
  });

  it('says, exit code 4, when the message does not reach the agent', async () => {
    // Registered in the Almanac with an endpoint nobody listens on.
    const gone = TestIdentity.random();
    await registerInAlmanac(t.url, gone, {
      timestamp: unixSeconds(Date.now()),
      endpoints: [{ url: `http://127.0.0.1:${await freePort()}/submit`, weight: 1 }],
    });
    const res = await chat([gone.address, 'anyone there?', '--timeout', '20']);
    assert.equal(res.code, 4, res.stderr);
    assert.match(
      res.stderr.split('\n').at(-1)!,
      new RegExp(`^agentry: the message did not reach ${gone.address}: .+`),
    );
    assertNoTrace(res.stderr);
  });

  it('asks for a key, refuses a wrong one, and says when the server does not answer', async () => {
    const none = await chat([echo.address, 'hello'], { AGENTRY_API_KEY: '' });
    assert.equal(none.code, 2);
    assert.match(none.stderr, /^agentry: give a user's API key with --key or AGENTRY_API_KEY/);
    const wrong = await chat([echo.address, 'hello', '--key', 'agy_wrong']);
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /^agentry: the server at .* refused the API key/);
    const down = `http://127.0.0.1:${await freePort()}`;
    const child = ChildRun.node(
      'agentry chat',
      agentryArgs('chat', '--url', down, echo.address, 'hi'),
      {
        ...process.env,
        AGENTRY_API_KEY: t.userKey,
      },
    );
    assert.equal(await child.waitForExit(), 3);
    assert.match(stderrOf(child), new RegExp(`^agentry: the server at ${down} does not answer`));
  });
});
