import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { defaults } from '../../src/config/index.js';
import type { DialectName } from '../../src/store/index.js';
import { resolveAgent } from '../kit/almanac.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { hostingDir, hostingSkipReason, Owner, sleep, type LogLine } from '../kit/hosted-agents.js';
import { call } from '../kit/http.js';
import { realClient } from '../kit/real-client.js';
import { startTestServer, type TestServer } from '../kit/server.js';

/**
 * Hosted agents as the real uAgents 0.25.5 runs them, deployed through the Hosting API, without
 * a sandbox and in bubblewrap: what they log is classified by level (a handler's traceback one
 * error entry, which makes the agent failing with the exception as the reason and goes on its
 * timeline), they register on the network their owner chose (and again on another when it is
 * changed), their own server listens on loopback only, the inspector link they log leads to
 * their page in the console, and a stop runs their shutdown handlers and tells the Almanac.
 */

const real = realClient('AGENTRY_TEST_PYTHON', { series: '0.25', fallback: 'python3' });

/** An interval handler that raises KeyError every two seconds. */
const RAISING = `
from uagents import Context


@agent.on_event("startup")
async def started(ctx: Context):
    ctx.logger.warning("about to fail on purpose")


@agent.on_interval(period=2.0)
async def tick(ctx: Context):
    settings = {}
    ctx.logger.info("looking up the missing key")
    print(settings["x"])
`;

/** A quiet agent with a shutdown handler. */
const TIDY = `
from uagents import Context


@agent.on_event("startup")
async def started(ctx: Context):
    ctx.logger.info(f"tidy agent {ctx.agent.address} is up")


@agent.on_event("shutdown")
async def stopping(ctx: Context):
    ctx.logger.info("shutdown handler ran")
`;

interface AgentStatus {
  status: string;
  reason: string | null;
}

function realHostedAgents(sandbox: 'off' | 'bwrap', dialect: DialectName): void {
  let t: TestServer;
  let owner: Owner;
  const scratch = hostingDir();
  let raising: string;
  let tidy: string;

  const statusOf = async (address: string): Promise<AgentStatus> => {
    const res = await call(t.url, 'GET', `/v2/agents/${address}`, { key: t.userKey });
    assert.equal(res.status, 200, res.text);
    return res.body.status as AgentStatus;
  };

  const logsOf = (address: string): Promise<LogLine[]> => owner.logs(address);

  async function eventually<T>(
    what: string,
    attempt: () => Promise<T | undefined>,
    timeoutMs = 60_000,
  ): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = await attempt();
      if (found !== undefined) return found;
      if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
      await sleep(100);
    }
  }

  before(async () => {
    t = await startTestServer({
      dialect,
      config: {
        hosting: {
          ...defaults.hosting,
          key: randomBytes(32).toString('hex'),
          python: real.python!,
          sandbox,
          egress: 'agentry',
          dir: join(scratch.dir, 'hosted'),
        },
      },
    });
    owner = new Owner(t);
    raising = await owner.deploy('raising', { 'agent.py': RAISING });
    tidy = await owner.deploy('tidy', { 'agent.py': TIDY }, {}, 'testnet');
  });

  after(async () => {
    await t?.close();
    scratch.remove();
  });

  it('makes an agent whose handler raises failing within 5 s, the exception its reason and the traceback on its timeline', async () => {
    const failingSeen = await eventually('the raising agent to be failing', async () =>
      (await statusOf(raising)).status === 'failing' ? Date.now() : undefined,
    );
    const logs = await logsOf(raising);
    const tracebacks = logs.filter((line) => line.log_entry.includes('Traceback'));
    assert.ok(tracebacks.length > 0, 'a traceback in the log');
    const first = tracebacks[0]!;
    assert.ok(
      failingSeen - Date.parse(first.log_timestamp) <= 5000,
      `failing ${failingSeen - Date.parse(first.log_timestamp)} ms after the exception`,
    );
    // uAgents' logger.exception: its ERROR line and the traceback, one entry at erro.
    assert.equal(first.log_level, 'erro');
    assert.equal(first.log_type, 'execution');
    const lines = first.log_entry.split('\n');
    assert.match(lines[0]!, /^ERROR: +\[raising\]: Exception in interval handler: 'x'$/);
    assert.equal(lines[1], 'Traceback (most recent call last):');
    assert.ok(
      lines.some((line) => line.includes('print(settings["x"])')),
      first.log_entry,
    );
    assert.equal(lines[lines.length - 1], "KeyError: 'x'");
    // Each of its lines is in that entry, not a line of its own.
    assert.ok(!logs.some((line) => line.log_entry === "KeyError: 'x'"));
    const warning = logs.find((line) => line.log_entry.includes('about to fail on purpose'));
    assert.equal(warning?.log_level, 'warn');
    const info = logs.find((line) => line.log_entry.includes('looking up the missing key'));
    assert.equal(info?.log_level, 'info');

    const status = await statusOf(raising);
    assert.equal(status.status, 'failing');
    assert.match(status.reason ?? '', /KeyError: 'x'/);

    const timeline = await call(t.url, 'GET', `/v2/agents/${raising}/activity?kind=event.error`, {
      key: t.userKey,
    });
    assert.equal(timeline.status, 200, timeline.text);
    const entry = (
      timeline.body.entries as { summary: string; data: Record<string, unknown> | null }[]
    ).find((e) => typeof e.data?.traceback === 'string');
    assert.ok(entry, timeline.text);
    assert.match(entry.summary, /KeyError: 'x'/);
    assert.equal(entry.data!.exception, 'KeyError');
    assert.match(String(entry.data!.traceback), /Traceback \(most recent call last\):/);
    assert.match(String(entry.data!.traceback), /KeyError: 'x'$/);
  });

  it('registers the agent on the network its owner chose, and logs no error of its own', async () => {
    await owner.waitForLog(tidy, /tidy agent .* is up/, 60_000);
    const record = await eventually('the testnet registration', async () => {
      const res = await resolveAgent(t.url, tidy, 'test-agent');
      return res.status === 200 ? res.body : undefined;
    });
    assert.equal(record.address, tidy);
    assert.equal((await resolveAgent(t.url, tidy, 'agent')).status, 404, 'not on mainnet');
    await sleep(2000);
    assert.notEqual((await statusOf(tidy)).status, 'failing');
    const errors = (await logsOf(tidy)).filter((line) => line.log_level === 'erro');
    assert.deepEqual(errors, []);
    // uAgents' lines about the Fetch.ai ledger it cannot reach are warnings here.
    assert.ok(
      (await logsOf(tidy)).every(
        (line) => !/^\w+: +\[network\]/.test(line.log_entry) || line.log_level === 'warn',
      ),
    );
  });

  it('logs an inspector link that leads to the agent’s page in the console', async () => {
    const line = await owner.waitForLog(tidy, /Agent inspector available at /);
    const link = /Agent inspector available at (\S+)$/.exec(line.log_entry)![1]!;
    assert.equal(link, `${t.config.publicUrl.replace(/\/$/, '')}/#/hosted/${tidy}`);
    const page = await fetch(link);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
  });

  if (sandbox === 'off') {
    it('serves the agent’s own endpoints on loopback only', async () => {
      const line = await owner.waitForLog(tidy, /Starting server on /);
      const [, host, port] = /Starting server on http:\/\/([^:]+):(\d+)/.exec(line.log_entry)!;
      assert.equal(host, '127.0.0.1');
      const listening = listeners(Number(port));
      assert.ok(listening.length > 0, `something listens on ${port}`);
      assert.deepEqual(
        listening.filter((address) => address !== '127.0.0.1' && address !== '::1'),
        [],
        `listening on ${listening.join(', ')}`,
      );
      const outside = Object.values(networkInterfaces())
        .flat()
        .find((address) => address && !address.internal && address.family === 'IPv4');
      if (outside) {
        const refused = await new Promise<string>((resolve) => {
          const socket = connect({ host: outside.address, port: Number(port) });
          socket.once('connect', () => {
            socket.destroy();
            resolve('connected');
          });
          socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
        });
        assert.equal(refused, 'ECONNREFUSED', `port ${port} on ${outside.address}`);
      }
    });
  }

  it('restarts the agent on the other network when its owner changes it', async () => {
    await owner.setNetwork(tidy, 'mainnet');
    const record = await eventually('the mainnet registration', async () => {
      const res = await resolveAgent(t.url, tidy, 'agent');
      return res.status === 200 ? res.body : undefined;
    });
    assert.equal(record.address, tidy);
    assert.equal((await resolveAgent(t.url, tidy, 'test-agent')).status, 404);
  });

  it('runs the shutdown handlers on stop, and the Almanac says the agent stopped', async () => {
    await eventually('the agent active in the Almanac', async () => {
      const res = await resolveAgent(t.url, tidy);
      return res.status === 200 && res.body.status === 'active' ? true : undefined;
    });
    const asked = Date.now();
    await owner.stop(tidy);
    await owner.waitForAgent(tidy, (a) => a.state === 'stopped', 20_000);
    const took = Date.now() - asked;
    const logs = (await logsOf(tidy)).map((line) => line.log_entry);
    const stop = logs.findLastIndex((line) => line === 'SIGTERM: the agent shuts down');
    assert.ok(stop !== -1, logs.slice(-20).join('\n'));
    const shutdown = logs.slice(stop);
    assert.ok(
      shutdown.some((line) => /\[\s*tidy\]: shutdown handler ran$/.test(line)),
      shutdown.join('\n'),
    );
    assert.ok(shutdown.some((line) => /Agent registration status updated to inactive$/.test(line)));
    assert.ok(shutdown.some((line) => /Shutting down agent\.\.\.complete\.$/.test(line)));
    assert.ok(took < 5000, `stopped in ${took} ms, within the grace`);
    const almanac = await resolveAgent(t.url, tidy);
    assert.equal(almanac.status, 200, almanac.text);
    assert.equal(almanac.body.status, 'inactive');
  });
}

/** The addresses that listen on a TCP port of this machine, from /proc/net/tcp and tcp6. */
function listeners(port: number): string[] {
  const found: string[] = [];
  for (const [file, v6] of [
    ['/proc/net/tcp', false],
    ['/proc/net/tcp6', true],
  ] as const) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const row of text.trim().split('\n').slice(1)) {
      const [, local, , state] = row.trim().split(/\s+/);
      const [hex, portHex] = local!.split(':');
      if (state !== '0A' || parseInt(portHex!, 16) !== port) continue;
      found.push(v6 ? ipv6(hex!) : ipv4(hex!));
    }
  }
  return found;
}

/** /proc/net/tcp's address: four bytes, little-endian. */
function ipv4(hex: string): string {
  return [3, 2, 1, 0].map((i) => parseInt(hex.slice(i * 2, i * 2 + 2), 16)).join('.');
}

/** /proc/net/tcp6's: four little-endian words; the two loopback and "any" spellings suffice. */
function ipv6(hex: string): string {
  if (/^0+$/.test(hex)) return '::';
  if (hex === '00000000000000000000000001000000') return '::1';
  return hex;
}

describe('hosted agents on the real uAgents', { skip: real.skip }, () => {
  describeOnEachDialect('without a sandbox', (dialect) => realHostedAgents('off', dialect));
  describe('in bubblewrap', { skip: hostingSkipReason('bwrap') }, () => {
    describeOnEachDialect('reaching only this Agentry', (dialect) =>
      realHostedAgents('bwrap', dialect),
    );
  });
});
