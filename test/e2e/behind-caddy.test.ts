import { spawn, spawnSync } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { openMailboxes, openStore } from '../../bench/lib/seed.js';
import { createTestDatabase, testPgUrl } from '../kit/databases.js';
import { freePort } from '../kit/ports.js';
import { repositoryRoot, spawnServer, type ServerProcess } from '../kit/process.js';
import { redisAnswers, testRedisUrl, uniqueRedisPrefix } from '../kit/redis.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/**
 * The deployment compose.yaml ships, run without containers: the real Caddy (Debian's `caddy`) with
 * the shipped deploy/Caddyfile, its upstreams and port given through the file's environment
 * placeholders, in front of two replicas on PostgreSQL sharing rate limits through Redis.
 * Thousands of agents hold their mailbox polls through it while one sender floods and others
 * send, and one replica is drained under it.
 *
 * Runs where Caddy is installed, PostgreSQL is given and open files allow (`skip`).
 * BEHIND_CADDY_AGENTS=n runs it with fewer agents; DEBUG_BEHIND_CADDY=1 prints its progress
 * on stderr and leaves the proxy's log in the temporary directory (behind-caddy-proxy.log).
 */

const AGENTS = Number(process.env.BEHIND_CADDY_AGENTS ?? 2000);
/** Loopback addresses the agents connect from (any of 127.0.0.0/8 reaches the proxy). */
const AGENT_ADDRESSES = 20;
/** Messages sent to the agents (one each to every fifth) by senders from other addresses. */
const MESSAGES = 200;
const SENDER_ADDRESSES = 10;
/** Agents that start polling at once. */
const RAMP = 250;
/** Anonymous requests one client address may make a minute. */
const RATE_LIMIT = 60;
const FLOOD = 150;
/** As compose.yaml sets it: longer than the proxy's health interval and upstream keep-alive (4 s). */
const DRAIN_SECONDS = 10;

const caddy = spawnSync('caddy', ['version'], { encoding: 'utf8' });
const caddyMissing = caddy.error
  ? 'Caddy is not installed (apt-get install caddy; .ci/run installs it)'
  : undefined;

/** The hard limit on open files: Node and Go raise their soft limit to it. */
function openFilesLimit(): number {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const soft = line?.split(/\s+/)[3];
  return soft === 'unlimited' ? Infinity : Number(soft ?? 0);
}
const fewFiles =
  openFilesLimit() < 3 * AGENTS
    ? `the open-file limit (${openFilesLimit()}) is below the ${3 * AGENTS} sockets the proxy needs`
    : undefined;

const skip = caddyMissing ?? (testPgUrl ? fewFiles : 'AGENTRY_TEST_PG_URL is not set');

const started = Date.now();
const progress = (what: string): void => {
  if (process.env.DEBUG_BEHIND_CADDY) console.error(`${Date.now() - started} ms: ${what}`);
};

/** What went wrong for a client, kept for the failure message. */
interface Trouble {
  who: string;
  what: string;
}

it(
  `behind the shipped Caddy, ${AGENTS} agents hold polls, a flood meets 429 alone, and a drain cuts nothing`,
  { skip, timeout: 170_000 },
  async () => {
    const database = await createTestDatabase('postgres');
    const work = mkdtempSync(join(tmpdir(), 'agentry-caddy-'));
    const redis = await redisAnswers();
    const env: Record<string, string> = {
      AGENTRY_TRUSTED_PROXIES: '127.0.0.1',
      AGENTRY_RATE_LIMIT_MAX: String(RATE_LIMIT),
      AGENTRY_RATE_LIMIT_WINDOW_MS: '60000',
      AGENTRY_DRAIN_SECONDS: String(DRAIN_SECONDS),
      // Polls stay held for the whole test unless a message or the drain ends them.
      AGENTRY_MAILBOX_HOLD_SECONDS: '150',
      ...(redis && {
        AGENTRY_REDIS_URL: testRedisUrl,
        AGENTRY_REDIS_KEY_PREFIX: uniqueRedisPrefix(),
      }),
    };
    const replicas: ServerProcess[] = [];
    let proxy: ReturnType<typeof spawn> | undefined;
    let caddyOutput = '';
    const dispatchers = new Map<string, Agent>();
    const dispatcher = (from: string): Agent => {
      let agent = dispatchers.get(from);
      if (!agent) dispatchers.set(from, (agent = new Agent({ localAddress: from })));
      return agent;
    };
    try {
      // The replicas start (and migrate) while this process makes the agents' keys and
      // attestations, each valid for the whole test.
      const starting = [
        spawnServer(['--database-url', database.url], env),
        spawnServer(['--database-url', database.url], env),
      ];
      const agents = Array.from({ length: AGENTS }, () => TestIdentity.random());
      const authorizations = agents.map((agent) => agent.authorization(Date.now(), 600));
      replicas.push(...(await Promise.all(starting)));
      const [a, b] = replicas as [ServerProcess, ServerProcess];

      // The shipped file itself: only its placeholders are filled in.
      const port = await freePort();
      proxy = spawn('caddy', ['run', '--config', join(repositoryRoot, 'deploy/Caddyfile')], {
        env: {
          PATH: process.env.PATH,
          // Caddy keeps its state (and would save its configuration) under these.
          HOME: work,
          XDG_CONFIG_HOME: join(work, 'config'),
          XDG_DATA_HOME: join(work, 'data'),
          CADDY_ADMIN: 'off',
          PROXY_SITE: `:${port}`,
          PROXY_UPSTREAMS: replicas.map((r) => new URL(r.url).host).join(' '),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const stopProxy = () => proxy?.kill('SIGTERM');
      process.once('exit', stopProxy);
      proxy.stdout!.on('data', (chunk: Buffer) => (caddyOutput += chunk.toString()));
      proxy.stderr!.on('data', (chunk: Buffer) => (caddyOutput += chunk.toString()));
      progress('replicas up');
      const base = `http://127.0.0.1:${port}`;
      for (let tries = 0; ; tries++) {
        const up = await fetch(`${base}/ready`).catch(() => undefined);
        if (up?.status === 200) break;
        if (tries > 200 || proxy.exitCode !== null) {
          throw new Error(`Caddy did not start:\n${caddyOutput}`);
        }
        await sleep(50);
      }

      progress('proxy up');
      // Agents and their mailboxes, written to the store (2,000 registrations through the API
      // would be most of the test's time), each with one attestation for the whole test.
      const store = openStore(database.url);
      await openMailboxes(
        store,
        agents.map((agent) => agent.address),
      );
      await store.close();

      progress('agents made');
      // Every agent polls through the proxy, one held poll after another, and deletes what
      // it receives, as the uAgents client does.
      const acknowledged: string[] = [];
      const sendStatuses: Record<string, number> = {};
      const floodStatuses: Record<string, number> = {};
      const troubles: Trouble[] = [];
      const received = new Set<string>();
      let polling = true;
      const stopPolls = new AbortController();
      // One signal for every poll: thousands of listeners are expected.
      setMaxListeners(0, stopPolls.signal);
      const heldPolls = async (replica: ServerProcess): Promise<number> => {
        const text = await (await fetch(`${replica.url}/metrics`)).text();
        return Number(/^agentry_mailbox_held_polls (\S+)$/m.exec(text)?.[1] ?? 0);
      };
      const until = async (what: string, condition: () => Promise<boolean> | boolean) => {
        const deadline = Date.now() + 45_000;
        let last = 0;
        while (!(await condition())) {
          if (Date.now() - last > 2000) {
            last = Date.now();
            progress(
              `waiting for ${what}: ${troubles.length} troubles ${JSON.stringify(troubles.slice(0, 2))} ${JSON.stringify(sendStatuses)} ${JSON.stringify(floodStatuses)} ${acknowledged.length}\n${caddyOutput
                .split('\n')
                .filter((l) => !l.includes('"info"'))
                .slice(-5)
                .join('\n')}`,
            );
          }
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
          await sleep(200);
        }
      };
      const poller = async (agent: TestIdentity, i: number): Promise<void> => {
        const from = `127.0.10.${(i % AGENT_ADDRESSES) + 1}`;
        const headers = { authorization: authorizations[i]! };
        const path = `/v2/agents/${agent.address}/mailbox`;
        while (polling) {
          try {
            const res = await request(`${base}${path}`, {
              headers,
              dispatcher: dispatcher(from),
              signal: stopPolls.signal,
            });
            const text = await res.body.text();
            if (res.statusCode !== 200) {
              troubles.push({ who: `poll of agent ${i}`, what: `${res.statusCode} ${text}` });
              await sleep(100);
              continue;
            }
            for (const item of JSON.parse(text) as {
              uuid: string;
              envelope: { signature: string };
            }[]) {
              received.add(item.envelope.signature);
              const gone = await request(`${base}${path}/${item.uuid}`, {
                method: 'DELETE',
                headers,
                dispatcher: dispatcher(from),
              });
              // The answer's body tells the proxy's own refusal (empty) from the replica's.
              const said = await gone.body.text();
              if (gone.statusCode !== 200 && gone.statusCode !== 204) {
                troubles.push({
                  who: `delete of agent ${i}`,
                  what: `${gone.statusCode} ${said || '(no body: the proxy answered)'}`,
                });
              }
            }
          } catch (err) {
            if (!polling) return;
            troubles.push({ who: `poll of agent ${i}`, what: `cut: ${String(err)}` });
            await sleep(100);
          }
        }
      };
      // They start a few hundred at a time, as agents do (not all in the same millisecond).
      const pollers: Promise<void>[] = [];
      for (let next = 0; next < AGENTS;) {
        const upTo = Math.min(AGENTS, next + RAMP);
        for (; next < upTo; next++) pollers.push(poller(agents[next]!, next));
        await until(
          `${upTo} held polls`,
          async () => (await heldPolls(a)) + (await heldPolls(b)) === upTo,
        );
      }
      progress('polls held');
      assert.ok((await heldPolls(a)) > AGENTS / 4, 'both replicas hold polls');

      // Senders, each from an address of its own, send one message to every agent; one more
      // sender floods (pretending, in X-Forwarded-For, to be someone else every time).
      const envelopes = Array.from({ length: MESSAGES }, (_, i) => {
        const agent = agents[(i * 5) % AGENTS]!;
        const sender = TestIdentity.fromSeed('behind caddy sender', i % SENDER_ADDRESSES);
        return sender.signEnvelope(
          makeEnvelope({
            sender: sender.address,
            target: agent.address,
            payloadJson: `{"n":${i}}`,
            nonce: i,
          }),
        );
      });
      const flooder = TestIdentity.fromSeed('behind caddy flood');
      const floods = Array.from({ length: FLOOD }, (_, i) =>
        flooder.signEnvelope(
          makeEnvelope({
            sender: flooder.address,
            target: agents[i % AGENTS]!.address,
            payloadJson: `{"flood":${i}}`,
            nonce: i,
          }),
        ),
      );
      const submit = async (
        envelope: { signature?: string | null },
        from: string,
        statuses: Record<string, number>,
        headers: Record<string, string> = {},
      ): Promise<void> => {
        let status: string;
        try {
          const res = await request(`${base}/v2/agents/mailbox/submit`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...headers },
            body: JSON.stringify(envelope),
            dispatcher: dispatcher(from),
          });
          const said = await res.body.text();
          status = String(res.statusCode);
          if (res.statusCode === 200) acknowledged.push(envelope.signature!);
          else if (res.statusCode !== 429) {
            troubles.push({
              who: `submit from ${from}`,
              what: `${res.statusCode} ${said || '(no body: the proxy answered)'}`,
            });
          }
        } catch (err) {
          status = `cut: ${String(err)}`;
        }
        statuses[status] = (statuses[status] ?? 0) + 1;
      };
      const senders = Array.from({ length: SENDER_ADDRESSES }, async (_, s) => {
        for (let i = s; i < MESSAGES; i += SENDER_ADDRESSES) {
          await submit(envelopes[i]!, `127.0.20.${s + 1}`, sendStatuses);
        }
      });
      const flood = Array.from({ length: 8 }, async (_, lane) => {
        for (let i = lane; i < FLOOD; i += 8) {
          await submit(floods[i]!, '127.0.30.1', floodStatuses, {
            'x-forwarded-for': `198.51.100.${(i % 250) + 1}`,
          });
        }
      });

      // The drain, while all of it goes on.
      await until('a quarter of the messages sent', () => acknowledged.length >= MESSAGES / 4);
      progress('draining');
      a.child.kill('SIGTERM');
      assert.equal(await a.exited, 0, a.child.output());
      progress('drained');
      await Promise.all([...senders, ...flood]);
      progress('sent');

      await until('every acknowledged message to be received', () =>
        acknowledged.every((signature) => received.has(signature)),
      );
      await until(
        'the other replica to hold every poll',
        async () => (await heldPolls(b)) === AGENTS,
      );
      polling = false;
      stopPolls.abort();
      await Promise.all(pollers);

      // On failure, the proxy's view of its upstreams tells whether it had none to send to.
      const upstreamLines = caddyOutput
        .split('\n')
        .filter((line) => /health_checker|no upstreams|upstream/i.test(line))
        .slice(-20)
        .join('\n');
      assert.deepEqual(
        troubles,
        [],
        `no poll or submit was cut or answered anything but 200 (or 429 for the flood); the proxy on its upstreams:\n${upstreamLines}`,
      );
      assert.deepEqual(sendStatuses, { '200': MESSAGES }, 'every sender got through');
      // Without Redis each replica counts for itself.
      const allowed = redis ? RATE_LIMIT : 2 * RATE_LIMIT;
      assert.ok(
        (floodStatuses['429'] ?? 0) >= FLOOD - allowed &&
          (floodStatuses['200'] ?? 0) <= allowed &&
          Object.keys(floodStatuses).every((status) => status === '200' || status === '429'),
        `the flood met 429 past its limit, whatever it claimed to be: ${JSON.stringify(floodStatuses)}`,
      );
      const lost = acknowledged.filter((signature) => !received.has(signature));
      assert.deepEqual(
        lost,
        [],
        `${lost.length} of ${acknowledged.length} acknowledged not delivered`,
      );
      for (const replica of replicas) {
        assert.doesNotMatch(
          replica.child.output(),
          /forwarding headers|request failed/,
          'the proxy is trusted and nothing failed',
        );
      }
    } finally {
      await Promise.all([...dispatchers.values()].map((d) => d.destroy()));
      proxy?.kill('SIGTERM');
      if (process.env.DEBUG_BEHIND_CADDY)
        writeFileSync(join(tmpdir(), 'behind-caddy-proxy.log'), caddyOutput);
      await Promise.all(replicas.map((replica) => replica.child.stop()));
      await database.drop();
      rmSync(work, { recursive: true, force: true });
    }
  },
);
