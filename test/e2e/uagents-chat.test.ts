import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/index.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { freePort } from '../kit/ports.js';
import {
  readyMailboxAgent,
  realClient,
  runScript,
  waitFor,
  type RunningScript,
  type ScriptLine,
} from '../kit/real-client.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { STORY, STORYTELLER_SCRIPT } from '../kit/storyteller.js';

/**
 * Chat for people (docs/chat.md) with the real client at both ends: an unmodified uAgents 0.25
 * chat agent, written as its users write one (a mailbox agent with the chat protocol of
 * `uagents_core`), connected with its owner's API key; and a person's script using `requests`
 * with their API key, which opens a session, says hello, asks for a story and follows the
 * session's stream. It runs with the interpreter AGENTRY_TEST_PYTHON names (`.ci/run` makes
 * one with the real client) and skips, saying so, where that interpreter cannot import
 * uagents 0.25.
 */
const { python, skip } = realClient('AGENTRY_TEST_PYTHON', { series: '0.25', fallback: 'python3' });

/**
 * The person's script: with their API key, it opens a session with the agent, follows its
 * stream, says "hello" and asks for a "story", reads the history, ends the session, and tries
 * what a read-only key and another user may not do. It prints each step as a JSON line; `ms`
 * is the time since the message was sent, as the stream is read.
 */
const CLIENT_SCRIPT = `
import json, sys, time
import requests

base, key, agent, other_key = sys.argv[1:5]
api = requests.Session()
api.headers["Authorization"] = f"Bearer {key}"


def say(**fields):
    print(json.dumps(fields), flush=True)


def events(response):
    """Server-Sent Events as (event, id, data), as they come."""
    name, event_id, data = None, None, []
    for line in response.iter_lines(chunk_size=None, decode_unicode=True):
        if line == "":
            if data:
                yield name or "message", event_id, "\\n".join(data)
            name, event_id, data = None, None, []
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "id":
                event_id = value
            elif field == "data":
                data.append(value)


opened = api.post(f"{base}/v2/chat/sessions", json={"agent": agent}, timeout=10)
say(step="open", status=opened.status_code, body=opened.json())
session = opened.json()["id"]
stream = api.get(
    f"{base}/v2/chat/sessions/{session}/stream",
    headers={"Accept": "text/event-stream"},
    stream=True,
    timeout=(5, 10),
)
say(step="stream", status=stream.status_code, type=stream.headers.get("content-type"))
incoming = events(stream)


def converse(text, until):
    started = time.monotonic()
    sent = api.post(f"{base}/v2/chat/sessions/{session}/messages", json={"text": text}, timeout=10)
    say(step="send", text=text, status=sent.status_code, body=sent.json())
    for name, event_id, data in incoming:
        entry = json.loads(data)
        say(step="event", said=text, event=name, id=event_id, entry=entry,
            ms=round((time.monotonic() - started) * 1000))
        if until(entry):
            return


converse("hello", lambda entry: entry["direction"] == "in" and entry["kind"] == "message")
converse("story", lambda entry: entry["direction"] == "in"
         and (entry["content"] or [{}])[-1].get("type") == "end-stream")
stream.close()

history = api.get(f"{base}/v2/chat/sessions/{session}/messages?limit=100", timeout=10)
say(step="history", status=history.status_code, body=history.json())

made = api.post(f"{base}/v2/api-keys", json={"label": "reads my chats", "read_only": True}, timeout=10)
read_only = {"Authorization": f"Bearer {made.json()['key']}"}
refused = requests.post(f"{base}/v2/chat/sessions/{session}/messages", headers=read_only,
                        json={"text": "may I?"}, timeout=10)
say(step="read-only send", status=refused.status_code, body=refused.json())
read = requests.get(f"{base}/v2/chat/sessions/{session}/messages", headers=read_only, timeout=10)
say(step="read-only read", status=read.status_code, count=len(read.json()))

other = {"Authorization": f"Bearer {other_key}"}
for method, path, body in [
    ("GET", f"/v2/chat/sessions/{session}", None),
    ("GET", f"/v2/chat/sessions/{session}/messages", None),
    ("GET", f"/v2/chat/sessions/{session}/stream", None),
    ("POST", f"/v2/chat/sessions/{session}/messages", {"text": "hi from elsewhere"}),
    ("POST", f"/v2/chat/sessions/{session}/end", None),
]:
    answer = requests.request(method, f"{base}{path}", headers=other, json=body, timeout=10)
    say(step="other user", method=method, path=path, status=answer.status_code)

ended = api.post(f"{base}/v2/chat/sessions/{session}/end", timeout=10)
say(step="end", status=ended.status_code, body=ended.json())
`;

type Line = ScriptLine;

interface Entry {
  id: string;
  at: string;
  direction: 'out' | 'in';
  kind: string;
  msg_id: string | null;
  text: string | null;
  content: { type: string; stream_id?: string }[] | null;
}

/** An entry as `kind direction [text|content type]`. */
function said(entry: Entry): string {
  const what = entry.text ?? entry.content?.map((part) => part.type).join(',');
  return `${entry.kind} ${entry.direction}${what === undefined ? '' : ` ${what}`}`;
}

describe(
  'a real uAgents chat agent, and a person chatting with it through the API',
  { skip },
  () => {
    describeOnEachDialect('chat', (dialect) => {
      let t: TestServer;
      let dir: string;
      let agent: RunningScript | undefined;
      let address: string;
      let client: { lines: Line[]; output: () => string; code: number | null };

      before(async () => {
        dir = mkdtempSync(join(tmpdir(), 'agentry-uagents-chat-'));
        t = await startTestServer({
          dialect,
          config: {
            // As deployed: the agent's polls are held, and a message reaches it at once.
            mailboxHoldSeconds: 20,
            // Replicas share no key file: on PostgreSQL the operator names the sealing key.
            hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
          },
        });
        writeFileSync(join(dir, 'storyteller.py'), STORYTELLER_SCRIPT);
        writeFileSync(join(dir, 'person.py'), CLIENT_SCRIPT);
        const port = await freePort();
        const agentUrl = `http://127.0.0.1:${port}`;
        agent = runScript(
          python!,
          'storyteller.py',
          [t.url, String(port), `storyteller ${Math.random()}`, JSON.stringify(STORY)],
          dir,
        );
        // Its owner connects it with their API key, as the inspector does; it then polls.
        address = await readyMailboxAgent(agent, agentUrl, t);

        const person = runScript(
          python!,
          'person.py',
          [t.url, t.userKey, address, await t.addUser(`elsewhere-${dialect}`)],
          dir,
        );
        const stuck = setTimeout(() => person.child.kill('SIGTERM'), 60_000);
        const code = await person.exited;
        clearTimeout(stuck);
        client = { lines: person.lines, output: person.output, code };
      });
      after(async () => {
        agent?.child.kill('SIGTERM');
        await agent?.exited;
        await t?.close();
        rmSync(dir, { recursive: true, force: true });
      });

      const steps = (step: string) => client.lines.filter((line) => line.step === step);
      const events = (text: string) =>
        steps('event')
          .filter((line) => line.said === text)
          .map((line) => ({
            ...(line as { event: string; id: string; ms: number }),
            entry: line.entry as Entry,
          }));

      it('the person’s script runs to its end', () => {
        assert.equal(client.code, 0, `${client.output()}\n--- agent ---\n${agent!.output()}`);
        const [opened] = steps('open');
        assert.equal(opened!.status, 201);
        assert.deepEqual(
          steps('stream').map((line) => [line.status, line.type]),
          [[200, 'text/event-stream; charset=utf-8']],
        );
      });

      it('is acknowledged and answered within a second of saying hello, in order', (t) => {
        const [sent] = steps('send');
        assert.equal(sent!.status, 201, JSON.stringify(sent));
        assert.equal((sent!.body as { failure: unknown }).failure, null);
        const hello = events('hello');
        assert.deepEqual(
          hello.map((e) => said(e.entry)),
          ['message out hello', 'acknowledgement in', 'message in You said: hello'],
        );
        for (const e of hello)
          assert.equal(e.event, e.entry.kind, 'each event is named by its kind');
        for (const e of hello) assert.equal(e.id, e.entry.id, 'each event’s id is its entry’s');
        const [out, ack, reply] = hello.map((e) => e.entry);
        assert.equal(ack!.msg_id, out!.msg_id, 'the acknowledgement names the message');
        t.diagnostic(
          `read after sending hello: ${hello.map((e) => `${said(e.entry)} ${e.ms} ms`).join('; ')}`,
        );
        for (const e of hello.slice(1)) {
          assert.ok(e.ms < 1000, `${e.entry.kind} read ${e.ms} ms after sending`);
        }
        assert.ok(Date.parse(ack!.at) <= Date.parse(reply!.at));
        // The agent heard it from the person's chat identity, under the session's id, as the
        // start of a session; and heard Agentry acknowledge its reply.
        const session = steps('open')[0]!.body as { id: string; identity: string };
        const message = agent!.lines.find((line) => line.message === out!.msg_id);
        assert.ok(message, agent!.output());
        assert.deepEqual(
          [message.sender, message.session, message.content, message.text],
          [session.identity, session.id, ['start-session', 'text'], 'hello'],
        );
        assert.ok(
          agent!.lines.some((line) => line.acknowledged === reply!.msg_id),
          'Agentry acknowledged the agent’s reply',
        );
      });

      it('streams a streamed reply as ordered chunks', (t) => {
        const story = events('story');
        t.diagnostic(
          `read after asking for a story: ${story.map((e) => `${said(e.entry)} ${e.ms} ms`).join('; ')}`,
        );
        assert.deepEqual(
          story.map((e) => said(e.entry)),
          [
            'message out story',
            'acknowledgement in',
            'message in start-stream',
            ...STORY.map((chunk) => `message in ${chunk}`),
            'message in end-stream',
          ],
        );
        const streamIds = [story[2]!, story.at(-1)!].map((e) => e.entry.content![0]!.stream_id);
        assert.equal(streamIds[0], streamIds[1], 'one stream, started and ended');
        const ids = story.map((e) => BigInt(e.entry.id));
        assert.deepEqual(
          ids,
          [...ids].sort((x, y) => (x < y ? -1 : 1)),
        );
      });

      it('keeps both sides in the history, and the session ends', () => {
        const [history] = steps('history');
        assert.equal(history!.status, 200);
        const streamed = [...events('hello'), ...events('story')].map((e) => e.entry);
        assert.deepEqual(history!.body as Entry[], streamed, 'the history is what was streamed');
        assert.deepEqual([...new Set(streamed.map((entry) => entry.direction))], ['out', 'in']);
        const [ended] = steps('end');
        assert.equal(ended!.status, 200);
        assert.notEqual((ended!.body as { ended_at: unknown }).ended_at, null);
      });

      it('refuses sending with a read-only key, and another user finds no such session', async () => {
        const [refused] = steps('read-only send');
        assert.equal(refused!.status, 403, JSON.stringify(refused));
        const [read] = steps('read-only read');
        assert.deepEqual(
          [read!.status, read!.count],
          [200, events('hello').length + events('story').length],
        );
        assert.deepEqual(
          steps('other user').map((line) => `${line.method} ${line.status}`),
          ['GET 404', 'GET 404', 'GET 404', 'POST 404', 'POST 404'],
        );
        // And the agent was told the session ended.
        await waitFor(
          () =>
            agent!.lines.find(
              (line) => Array.isArray(line.content) && line.content.includes('end-session'),
            ),
          'the end of the session',
          10_000,
        );
      });
    });
  },
);
