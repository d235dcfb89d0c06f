import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TimelineEntry } from '../../src/wire/activity.js';
import { WEBHOOK_KINDS } from '../../src/wire/webhooks.js';
import { capturingLogger, WARN } from '../kit/captured-log.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { freePort } from '../kit/ports.js';
import {
  agentServerUp,
  realClient,
  type RunningScript,
  runScript,
  waitFor,
} from '../kit/real-client.js';
import { startTestServer } from '../kit/server.js';
import { startWebhookSink } from '../kit/webhook-sink.js';

/**
 * A dead proxy agent, as it was found: an unmodified uAgents 0.25 proxy agent, connected with
 * its owner's API key, is killed with SIGKILL while another real agent sends it a message every
 * 3 s through Agentry's proxy; after a while it starts again. It runs with the interpreter
 * AGENTRY_TEST_PYTHON names and skips, saying so, where that interpreter cannot import uagents
 * 0.25.
 */
const { python, skip } = realClient('AGENTRY_TEST_PYTHON', { series: '0.25', fallback: 'python3' });

const MODEL = `
from uagents import Model


class Ping(Model):
    n: int
`;

/** The proxy agent: it prints each ping it receives. */
const TARGET_SCRIPT = `
import json, sys
from uagents import Agent, Context
from ping import Ping

agentverse, port, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3]
agent = Agent(name="target", seed=seed, port=port, proxy=True, agentverse=agentverse)


@agent.on_message(Ping)
async def on_ping(ctx: Context, sender: str, msg: Ping):
    print(json.dumps({"ping": msg.n}), flush=True)


print(json.dumps({"address": agent.address}), flush=True)
agent.run()
`;

/** The sender: a ping every 3 s, through the proxy the target registered in the Almanac. */
const SENDER_SCRIPT = `
import json, sys
from uagents import Agent, Context
from ping import Ping

agentverse, port, seed, target = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
agent = Agent(name="sender", seed=seed, port=port, agentverse=agentverse)
sent = 0


@agent.on_interval(period=3.0)
async def ping(ctx: Context):
    global sent
    sent += 1
    status = await ctx.send(target, Ping(n=sent))
    print(json.dumps({"sent": sent, "status": str(getattr(status, "status", status))}), flush=True)


agent.run()
`;

describe('a real uAgents proxy agent killed while a real agent sends to it', { skip }, () => {
  describeOnEachDialect('a dead proxy agent', (dialect) => {
    it('is one outage: two warnings, two webhooks, one timeline entry; back, it gets what waited', async (context) => {
      const { logger, lines, raw } = capturingLogger();
      const sink = await startWebhookSink();
      const t = await startTestServer({
        dialect,
        logger,
        config: { allowPrivateTargets: true, proxyTimeoutMs: 2000 },
      });
      const dir = mkdtempSync(join(tmpdir(), 'agentry-uagents-outage-'));
      const running: RunningScript[] = [];
      const run = (script: string, args: string[]) => {
        const child = runScript(python!, script, args, dir);
        running.push(child);
        return child;
      };
      const outputs = () => running.map((child) => child.output()).join('\n---\n');
      try {
        writeFileSync(join(dir, 'ping.py'), MODEL);
        writeFileSync(join(dir, 'target.py'), TARGET_SCRIPT);
        writeFileSync(join(dir, 'sender.py'), SENDER_SCRIPT);
        const [targetPort, senderPort] = [await freePort(), await freePort()];
        const targetSeed = `target ${Math.random()}`;
        const targetArgs = [t.url, String(targetPort), targetSeed];
        let target = run('target.py', targetArgs);
        const address = (await waitFor(() => target.lines[0], 'the target to start'))
          .address as string;
        const agentUrl = `http://127.0.0.1:${targetPort}`;
        await agentServerUp(agentUrl);
        // Its owner connects it as a proxy agent with their API key, as the inspector does.
        const res = await fetch(`${agentUrl}/connect`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            user_token: t.userKey,
            agent_type: 'proxy',
            endpoint: `${agentUrl}/submit`,
          }),
        });
        const connected = (await res.json()) as { success: boolean; detail?: string | null };
        assert.equal(connected.success, true, connected.detail ?? outputs());
        const hook = await call(t.url, 'POST', '/v2/webhooks', {
          key: t.userKey,
          body: { url: `${sink.url}/hook`, kinds: [...WEBHOOK_KINDS] },
        });
        assert.equal(hook.status, 201, hook.text);

        const sender = run('sender.py', [
          t.url,
          String(senderPort),
          `sender ${Math.random()}`,
          address,
        ]);
        const pings = () => target.lines.filter((line) => typeof line.ping === 'number');
        await waitFor(() => (pings().length >= 2 ? true : undefined), 'two pings delivered');

        // Killed: the sender goes on, a ping every 3 s, for 45 s.
        target.child.kill('SIGKILL');
        await target.exited;
        const sentBefore = sender.lines.length;
        const logged = lines.length;
        const told = sink.received.length;
        await sleep(45_000);
        const sentWhileDown = sender.lines.length - sentBefore;
        assert.ok(sentWhileDown >= 13, `${sentWhileDown} sent while it was down\n${outputs()}`);
        const warnings = () => lines.slice(logged).filter((line) => line.level >= WARN);
        assert.deepEqual(
          warnings().map((line) => [line.msg, line.agent]),
          [['forwards to the agent failing', address]],
          raw.slice(logged).join('\n'),
        );
        const attempts = await call(
          t.url,
          'GET',
          `/v2/agents/${address}/deliveries?status=forwarded&limit=1000`,
          { key: t.userKey },
        );
        const failed = (attempts.body as { status_code: number | null }[]).filter(
          (row) => row.status_code === null,
        );
        // 2 s, doubling to 30 s, each up to a quarter longer: a handful in 45 s.
        assert.ok(failed.length <= 8, `${failed.length} failed attempts`);

        // Started again: it registers in the Almanac, and what waited reaches it.
        target = run('target.py', targetArgs);
        const started = Date.now();
        await waitFor(
          () => (pings().length >= 3 ? true : undefined),
          'the waiting pings delivered',
          20_000,
        );
        const latency = Date.now() - started;
        await waitFor(
          () => (warnings().length === 2 ? true : undefined),
          'the warning that it is back',
          10_000,
        );
        assert.match(
          String(warnings()[1]!.msg),
          /^forwards to the agent back after \d+ s, \d+ messages failed$/,
        );
        await waitFor(
          () => (sink.received.some((r) => r.kind === 'forwards.back') ? true : undefined),
          'the webhook of its end',
          10_000,
        );
        const kinds = sink.received.slice(told).map((r) => r.kind);
        assert.equal(kinds.filter((kind) => kind === 'message.forward_failed').length, 1);
        assert.ok(kinds.length <= 5, kinds.join(', '));
        assert.ok(lines.length - logged <= 12, raw.slice(logged).join('\n'));

        const timeline = await call(
          t.url,
          'GET',
          `/v2/agents/${address}/activity?kind=forwards&limit=100`,
          { key: t.userKey },
        );
        const entries = timeline.body.entries as TimelineEntry[];
        assert.deepEqual(
          entries.map((entry) => entry.kind),
          ['forwards.back', 'forwards.failing'],
        );
        const outage = entries[1]!.data as Record<string, unknown>;
        assert.ok(Number(outage.messages) >= sentWhileDown, JSON.stringify(outage));
        assert.ok(latency < 20_000, `${latency} ms`);
        context.diagnostic(
          `45 s down, ${sentWhileDown} sent: ${failed.length} failed attempts, ${lines.length - logged} log lines, ${kinds.length} webhooks (${kinds.join(', ')}); back: ${pings().length} waiting pings within ${latency} ms of its start`,
        );
      } finally {
        for (const child of running) child.child.kill('SIGTERM');
        await Promise.all(running.map((child) => child.exited));
        await t.close();
        await sink.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
