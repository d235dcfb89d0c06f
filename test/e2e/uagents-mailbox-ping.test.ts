import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { currentUsage } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { freePort } from '../kit/ports.js';
import {
  readyMailboxAgent,
  realClient,
  runScript,
  waitFor,
  type RunningScript,
} from '../kit/real-client.js';
import { startTestServer, type TestServer } from '../kit/server.js';

/**
 * Real uAgents 0.25 agents on the paths whose statements are compiled once (the Almanac's
 * registration with its protocol rows, the mailbox's group commit, a held poll's page and its
 * transfer count, the delete): an endpoint agent pings a mailbox agent again and again, each
 * Ping reaches it once through its held poll, and each Pong comes back. A held poll woken by
 * the Ping's commit answers it without reading it back, and writes down what it handed out
 * (the transfer, the trace's rows) in one go. Skips, saying why, where AGENTRY_TEST_PYTHON has
 * no uagents 0.25.
 */
const { python, skip } = realClient('AGENTRY_TEST_PYTHON', { series: '0.25' });

const PINGS = 4;

const AGENT_SCRIPT = `
import asyncio, json, sys
from uagents import Agent, Context, Model, Protocol

role, agentverse, port, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


class Ping(Model):
    n: int


class Pong(Model):
    n: int


def say(**fields):
    print(json.dumps(fields), flush=True)


if role == "mailbox":
    agent = Agent(name="responder", seed=seed, port=port, mailbox=True, agentverse=agentverse)
else:
    agent = Agent(name="pinger", seed=seed, port=port, agentverse=agentverse,
                  endpoint=[f"http://127.0.0.1:{port}/submit"])
pingpong = Protocol(name="pingpong", version="1.0")


@pingpong.on_message(Ping)
async def answer(ctx: Context, sender: str, msg: Ping):
    say(heard=msg.n)
    await ctx.send(sender, Pong(n=msg.n))


@pingpong.on_message(Pong)
async def answered(ctx: Context, sender: str, msg: Pong):
    say(pong=msg.n)


agent.include(pingpong)

if role == "pinger":
    @agent.on_event("startup")
    async def start(ctx: Context):
        async def pings():
            for n in range(int(sys.argv[6])):
                await ctx.send(sys.argv[5], Ping(n=n))
                # The mailbox agent polls again a second after a poll that brought it messages.
                await asyncio.sleep(1.5)
        asyncio.get_running_loop().create_task(pings())

say(address=agent.address)
agent.run()
`;

describeOnEachDialect('real uAgents: pings to a mailbox agent and its pongs', (dialect) => {
  let t: TestServer;
  let dir: string;
  const started: RunningScript[] = [];

  before(async () => {
    if (skip) return;
    t = await startTestServer({ dialect, config: { mailboxHoldSeconds: 20 } });
    dir = mkdtempSync(join(tmpdir(), 'agentry-mailbox-ping-'));
    writeFileSync(join(dir, 'agent.py'), AGENT_SCRIPT);
  });

  const transferred = async (): Promise<number> =>
    (await currentUsage(t.url, t.userKey)).bytes_transferred;

  after(async () => {
    for (const agent of started) agent.child.kill('SIGKILL');
    await Promise.all(started.map((agent) => agent.exited));
    if (skip) return;
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it(
    'answers every Ping once, through the held poll, and the mailbox ends empty',
    { skip },
    async () => {
      const run = async (args: string[]) => {
        const port = await freePort();
        const [role, seed, ...rest] = args;
        const agent = runScript(
          python!,
          'agent.py',
          [role!, t.url, String(port), seed!, ...rest],
          dir,
        );
        started.push(agent);
        return { agent, url: `http://127.0.0.1:${port}` };
      };
      const responder = await run(['mailbox', `mailbox ping responder ${dialect}`]);
      const address = await readyMailboxAgent(responder.agent, responder.url, t);
      const transferredBefore = await transferred();
      // Reads of the responder's mailbox that found messages: a poll woken by a Ping's commit
      // answers it without one.
      const { mailbox } = t.server.ctx.store.repos;
      const listPending = mailbox.listPending.bind(mailbox);
      let readsThatFound = 0;
      mailbox.listPending = async (...args) => {
        const found = await listPending(...args);
        if (args[0] === address && found.length > 0) readsThatFound += 1;
        return found;
      };
      const pinger = await run([
        'pinger',
        `mailbox ping pinger ${dialect}`,
        address,
        String(PINGS),
      ]);

      const pongs = await waitFor(
        () => {
          const got = pinger.agent.lines.filter((line) => typeof line.pong === 'number');
          return got.length === PINGS ? got.map((line) => line.pong) : undefined;
        },
        `${PINGS} pongs\n${pinger.agent.output()}\n${responder.agent.output()}`,
        60_000,
      );
      assert.deepEqual(pongs, [0, 1, 2, 3]);
      const heard = responder.agent.lines.filter((line) => typeof line.heard === 'number');
      assert.deepEqual(
        heard.map((line) => line.heard),
        [0, 1, 2, 3],
      );
      mailbox.listPending = listPending;
      assert.ok(
        readsThatFound < PINGS,
        `${readsThatFound} of ${PINGS} Pings were read back for the poll that took them`,
      );
      // Each Ping was taken and deleted: nothing waits in the mailbox, and its counters say so.
      const listing = await waitFor(async () => {
        const res = await fetch(`${t.url}/v2/agents/${address}`, {
          headers: { authorization: `Bearer ${t.userKey}` },
        });
        const body = (await res.json()) as {
          mailbox?: { pending_messages: number; bytes_stored: number };
        };
        return body.mailbox?.pending_messages === 0 ? body.mailbox : undefined;
      }, 'the mailbox to be empty');
      assert.equal(listing.bytes_stored, 0);
      // Each Ping's trace: stored, handed to the agent, deleted by it; its bytes transferred.
      const res = await fetch(`${t.url}/v2/agents/${address}/deliveries`, {
        headers: { authorization: `Bearer ${t.userKey}` },
      });
      assert.equal(res.status, 200);
      const rows = (await res.json()) as { uuid: string; event: string; size: number | null }[];
      const stored = rows.filter((row) => row.event === 'stored');
      assert.equal(stored.length, PINGS, JSON.stringify(rows));
      for (const { uuid } of stored) {
        assert.deepEqual(
          rows.filter((row) => row.uuid === uuid).map((row) => row.event),
          ['submitted', 'stored', 'polled', 'deleted'],
          JSON.stringify(rows),
        );
      }
      const bytes = stored.reduce((sum, row) => sum + Number(row.size), 0);
      assert.equal((await transferred()) - transferredBefore, bytes);
    },
  );
});
