import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentCard, TaskState } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { loadConfig } from '../../src/config/index.js';
import { a2aClient, sendText, streamText, textOfMessage } from '../kit/a2a.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { freePort } from '../kit/ports.js';
import {
  readyMailboxAgent,
  realClient,
  runScript,
  type RunningScript,
} from '../kit/real-client.js';
import { startTestServer, type TestServer } from '../kit/server.js';
import { STORY, STORYTELLER_SCRIPT } from '../kit/storyteller.js';

/**
 * A2A outward (docs/a2a.md) with the real components at both ends: the A2A SDK's own client,
 * which finds the agent by its card, against an unmodified uAgents 0.25 chat agent connected to
 * Agentry as a mailbox agent. It runs with the interpreter AGENTRY_TEST_PYTHON names (`.ci/run`
 * makes one with the real client) and skips, saying so, where that cannot import uagents 0.25.
 */
const { python, skip } = realClient('AGENTRY_TEST_PYTHON', { series: '0.25', fallback: 'python3' });

describe('a real uAgents chat agent, called over A2A with the A2A SDK’s client', { skip }, () => {
  describeOnEachDialect('A2A', (dialect) => {
    let t: TestServer;
    let dir: string;
    let agent: RunningScript | undefined;
    let address: string;
    let client: Client;

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'agentry-a2a-'));
      t = await startTestServer({
        dialect,
        config: {
          mailboxHoldSeconds: 20,
          hosting: { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') },
        },
      });
      writeFileSync(join(dir, 'storyteller.py'), STORYTELLER_SCRIPT);
      const port = await freePort();
      agent = runScript(
        python!,
        'storyteller.py',
        [t.url, String(port), `storyteller ${Math.random()}`, JSON.stringify(STORY)],
        dir,
      );
      address = await readyMailboxAgent(agent, `http://127.0.0.1:${port}`, t);
      const served = await call(t.url, 'PUT', `/v2/agents/${address}/a2a`, {
        key: t.userKey,
        body: { access: 'private' },
      });
      assert.equal(served.status, 200, served.text);
      client = await a2aClient(`${t.url}/a2a/${address}`, t.userKey);
    });
    after(async () => {
      agent?.child.kill('SIGTERM');
      await agent?.exited;
      await t?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('fetches a card that validates, naming the agent and its chat skill', async () => {
      const card = await client.getAgentCard();
      assert.equal(card.name, 'storyteller');
      assert.ok(card.skills.some((skill) => skill.id === 'chat'));
      const served = await call(t.url, 'GET', `/a2a/${address}/.well-known/agent-card.json`, {
        key: t.userKey,
      });
      assert.deepEqual(AgentCard.toJSON(AgentCard.fromJSON(served.body)), served.body);
    });

    it('sends "hello" and gets the agent’s reply', async () => {
      const task = await sendText(client, 'hello');
      assert.equal(task.status?.state, TaskState.TASK_STATE_COMPLETED, agent!.output());
      assert.equal(textOfMessage(task.status?.message), 'You said: hello');
      const heard = agent!.lines.find((line) => line.message === task.id);
      assert.ok(heard, `the agent heard the task as a chat message\n${agent!.output()}`);
      assert.equal(heard.text, 'hello');
    });

    it('streams the chunks of a streamed reply in order', async (tc) => {
      const started = Date.now();
      const { chunks, states } = await streamText(client, 'story');
      tc.diagnostic(`the streamed story took ${Date.now() - started} ms`);
      assert.deepEqual(chunks, STORY);
      assert.equal(states.at(-1), TaskState.TASK_STATE_COMPLETED);
      assert.ok(states.includes(TaskState.TASK_STATE_WORKING), 'working once acknowledged');
    });
  });
});
