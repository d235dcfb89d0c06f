import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DeliveryEventView } from '../../src/wire/deliveries.js';
import { createTestDatabase, testPgUrl, type TestDatabase } from '../kit/databases.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import {
  createNamespaceNetwork,
  namespacesUnavailable,
  type FetchedInside,
  type NamespaceNetwork,
  type NetworkNamespace,
} from '../kit/netns.js';
import { agentryArgs, type ChildRun } from '../kit/process.js';
import { TestIdentity } from '../kit/uagent.js';
import { realClient, runScript, waitFor, type RunningScript } from '../kit/real-client.js';

/**
 * Federation between two Agentry instances (docs/federation.md), each in a network namespace
 * of its own with an address of its own, so that nothing rides on a shared loopback: A and B
 * name each other as peers; an unmodified uAgents 0.25 mailbox agent on each, registered on
 * its own instance only and published to the peers, sends to the other by address (no
 * resolver given: the instance it was connected to resolves it) and hears the reply. On both
 * stores: SQLite files, and PostgreSQL through its Unix socket (a namespace cannot reach the
 * server's loopback, but the socket is a file).
 *
 * Needs root and `ip netns` (skipped otherwise, saying so); the agents need the interpreter
 * AGENTRY_TEST_PYTHON names, with the real uAgents 0.25.
 */
const noNamespaces = namespacesUnavailable();
const { python, skip: noClient } = realClient('AGENTRY_TEST_PYTHON', {
  series: '0.25',
  fallback: 'python3',
});

/** Where PostgreSQL's Unix socket is, as the server's packages put it. */
const PG_SOCKET_DIR = '/var/run/postgresql';

/** The port each instance listens on, inside its own namespace. */
const AGENTRY_PORT = 8000;
/** The port of each agent's own server, inside its instance's namespace. */
const AGENT_PORT = 8100;
/** How long an instance keeps a record a peer answered. */
const CACHE_SECONDS = 3;

/**
 * Each agent: when the test writes an address into its outbox file it sends that agent a Ping
 * (`ctx.send`, no resolver) and prints how it went; it answers a Ping with a Pong; it prints
 * what it hears as JSON lines.
 */
const AGENT_SCRIPT = `
import json, os, sys
from uagents import Agent, Context, Model

agentverse, port, seed, outbox = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]


class Ping(Model):
    text: str


class Pong(Model):
    text: str


agent = Agent(name="federated", seed=seed, port=port, mailbox=True, agentverse=agentverse)


def say(**fields):
    print(json.dumps(fields), flush=True)


def told(status):
    return dict(status=getattr(status.status, "value", str(status.status)), detail=status.detail)


@agent.on_interval(period=0.5)
async def send_when_told(ctx: Context):
    if not os.path.exists(outbox):
        return
    with open(outbox) as f:
        target = f.read().strip()
    os.remove(outbox)
    status = await ctx.send(target, Ping(text="hello from the other namespace"))
    say(sent=target, **told(status))


@agent.on_message(Ping)
async def on_ping(ctx: Context, sender: str, msg: Ping):
    say(ping=msg.text, sender=sender)
    status = await ctx.send(sender, Pong(text="pong: " + msg.text))
    say(replied=sender, **told(status))


@agent.on_message(Pong)
async def on_pong(ctx: Context, sender: str, msg: Pong):
    say(pong=msg.text, sender=sender)


say(address=agent.address)
agent.run()
`;

/** One Agentry process in its namespace, restarted with other settings as the test goes. */
class Instance {
  child: ChildRun | undefined;
  /** The key of the user made on first start. */
  userKey = '';
  /** Its federation identity, from `GET /v2/federation`. */
  address: string | undefined;
  readonly url: string;

  constructor(
    readonly name: string,
    readonly namespace: NetworkNamespace,
    private readonly settings: Record<string, string>,
  ) {
    this.url = `http://${namespace.address}:${AGENTRY_PORT}`;
  }

  /** Starts `agentry serve` inside the namespace, bound to its address; resolves once it listens. */
  async start(extra: Record<string, string> = {}): Promise<void> {
    const child = this.namespace.spawn(
      `agentry ${this.name}`,
      process.execPath,
      agentryArgs('serve', '--host', this.namespace.address, '--port', String(AGENTRY_PORT)),
      {
        ...process.env,
        AGENTRY_PUBLIC_URL: this.url,
        AGENTRY_ALLOW_PRIVATE_TARGETS: 'true',
        AGENTRY_LOG_LEVEL: 'info',
        AGENTRY_LOG_FORMAT: 'json',
        AGENTRY_RATE_LIMIT_MAX: '0',
        AGENTRY_DRAIN_SECONDS: '0',
        // As deployed: the agents' polls are held, and a message reaches them at once.
        AGENTRY_MAILBOX_HOLD_SECONDS: '20',
        AGENTRY_FEDERATION_CACHE_SECONDS: String(CACHE_SECONDS),
        AGENTRY_FEDERATION_TIMEOUT_MS: '10000',
        ...this.settings,
        ...extra,
      },
    );
    this.child = child;
    await child.waitForOutput(/"address":"http:\/\/[^"]+"/, 120_000);
    // The first-start key is printed before the server starts listening.
    this.userKey ||= /^\s+(agy_\S+)$/m.exec(child.stdout())?.[1] ?? '';
    assert.ok(this.userKey, `${this.name} printed no key on first start:\n${child.output()}`);
  }

  async stop(): Promise<void> {
    await this.child?.stop();
    this.child = undefined;
  }

  /** Reads the instance's federation identity from its `GET /v2/federation`. */
  async readAddress(): Promise<void> {
    const res = await call(this.url, 'GET', '/v2/federation');
    assert.equal(res.status, 200, `${this.name}: GET /v2/federation: ${res.text}`);
    this.address = (res.body as { address: string }).address;
    assert.match(this.address, /^agent1[a-z0-9]+$/);
  }

  output(): string {
    return this.child?.output().slice(-4000) ?? '';
  }
}

/** A status, or the code of the error when the fetch got none. */
const outcome = (fetched: FetchedInside): string =>
  'status' in fetched ? String(fetched.status) : fetched.error;

/**
 * A mailbox agent just started in `namespace` (its first JSON line names its `address`), made
 * ready as its owner makes it: connected with the owner's key through the agent's own
 * `/connect`, which uAgents takes only from its host's loopback (as from the owner's inspector
 * there), so it is called from inside the namespace; then polling its mailbox. Answers its
 * address.
 */
async function readyAgentIn(
  namespace: NetworkNamespace,
  agent: RunningScript,
  instance: Instance,
): Promise<string> {
  const address = (await waitFor(() => agent.lines[0], 'the agent to start', 120_000))
    .address as string;
  const local = `http://127.0.0.1:${AGENT_PORT}`;
  await waitFor(
    async () =>
      outcome(await namespace.fetch(`${local}/agent_info`)) === '200' ? true : undefined,
    'the agent’s server',
    120_000,
  );
  const connected = await namespace.fetch(`${local}/connect`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ user_token: instance.userKey, agent_type: 'mailbox' }),
    timeoutMs: 30_000,
  });
  assert.ok(
    'status' in connected && (JSON.parse(connected.text) as { success?: boolean }).success,
    `the agent could not connect to ${instance.name}: ${JSON.stringify(connected)}\n${agent.output()}`,
  );
  await waitFor(async () => {
    const listing = await call(instance.url, 'GET', `/v2/agents/${address}`, {
      key: instance.userKey,
    });
    return (
      (listing.body as { status?: { last_seen?: string | null } }).status?.last_seen ?? undefined
    );
  }, 'the agent’s first poll');
  return address;
}

describe(
  'two federated Agentry instances, each in a network namespace of its own',
  {
    skip: noNamespaces,
  },
  () => {
    describeOnEachDialect('federation across namespaces', (dialect) => {
      const skipPostgres =
        dialect === 'postgres' && !existsSync(join(PG_SOCKET_DIR, `.s.PGSQL.${pgPort()}`))
          ? `PostgreSQL's Unix socket is not in ${PG_SOCKET_DIR}`
          : false;
      let network: NamespaceNetwork | undefined;
      let dir: string;
      const databases: TestDatabase[] = [];
      let a: Instance;
      let b: Instance;

      before(async () => {
        if (skipPostgres) return;
        dir = mkdtempSync(join(tmpdir(), 'agentry-federation-netns-'));
        network = createNamespaceNetwork(2);
        const [nsA, nsB] = network.namespaces as [NetworkNamespace, NetworkNamespace];
        const settingsOf = async (name: string): Promise<Record<string, string>> => {
          const home = join(dir, name);
          mkdirSync(home);
          return {
            AGENTRY_DATABASE_URL: await databaseUrl(dialect, home, databases),
            AGENTRY_HOSTING_DIR: join(home, 'hosted'),
            AGENTRY_HOSTING_KEY: randomBytes(32).toString('hex'),
          };
        };
        a = new Instance('A', nsA, await settingsOf('a'));
        b = new Instance('B', nsB, await settingsOf('b'));
        await Promise.all([a.start(), b.start()]);
      });

      after(async () => {
        try {
          await Promise.all([a?.stop(), b?.stop()]);
        } finally {
          network?.destroy();
          for (const database of databases) await database.drop().catch(() => undefined);
          if (dir) rmSync(dir, { recursive: true, force: true });
        }
      });

      it(
        'serves each instance on its own namespace’s address, not on a loopback they share',
        {
          skip: skipPostgres,
        },
        async () => {
          const [nsA, nsB] = network!.namespaces as [NetworkNamespace, NetworkNamespace];
          assert.notEqual(nsA.address, nsB.address);
          // From the root namespace (the bridge's gateway) both answer at their addresses.
          for (const instance of [a, b]) {
            const health = await call(instance.url, 'GET', '/health');
            assert.equal(health.status, 200, `${instance.name}: ${health.text}`);
          }
          // From A's namespace, B is at its address and at no loopback port.
          assert.equal(outcome(await nsA.fetch(`${b.url}/health`)), '200');
          assert.equal(
            outcome(await nsA.fetch(`http://127.0.0.1:${AGENTRY_PORT}/health`)),
            'ECONNREFUSED',
          );
          assert.equal(outcome(await nsB.fetch(`${a.url}/health`)), '200');
        },
      );

      it(
        'tells each instance’s federation address, and restarts each with the other as its peer',
        {
          skip: skipPostgres,
        },
        async () => {
          await Promise.all([a.readAddress(), b.readAddress()]);
          assert.notEqual(a.address, b.address);
          await Promise.all([a.stop(), b.stop()]);
          await Promise.all([
            a.start({ AGENTRY_PEERS: `${b.url}=${b.address}` }),
            b.start({ AGENTRY_PEERS: `${a.url}=${a.address}` }),
          ]);
          const told = await call(a.url, 'GET', '/v2/federation/health', { key: a.userKey });
          assert.equal(told.status, 200, told.text);
          assert.equal(told.body.address, a.address);
          assert.equal(told.body.url, a.url);
          assert.equal(JSON.stringify(told.body.peers).includes(b.url), true, told.text);
        },
      );

      describe(
        'with a real uAgents agent on each instance',
        { skip: skipPostgres || noClient },
        () => {
          let agentA: RunningScript | undefined;
          let agentB: RunningScript | undefined;
          let a1: string;
          let b1: string;
          const outboxOf = (name: string) => join(dir, `${name}.outbox`);

          before(async () => {
            writeFileSync(join(dir, 'agent.py'), AGENT_SCRIPT);
            const [nsA, nsB] = network!.namespaces as [NetworkNamespace, NetworkNamespace];
            const startAgent = (instance: Instance, namespace: NetworkNamespace, name: string) =>
              runScript(
                python!,
                'agent.py',
                [instance.url, String(AGENT_PORT), `${name} ${Math.random()}`, outboxOf(name)],
                dir,
                namespace.launcher(),
              );
            agentA = startAgent(a, nsA, 'a1');
            agentB = startAgent(b, nsB, 'b1');
            // Each owner connects their agent to their own instance; it then polls there.
            [a1, b1] = await Promise.all([
              readyAgentIn(nsA, agentA, a),
              readyAgentIn(nsB, agentB, b),
            ]);
          });
          after(async () => {
            for (const agent of [agentA, agentB]) agent?.child.kill('SIGTERM');
            await Promise.all([agentA?.exited, agentB?.exited]);
          });

          const lookUp = (on: Instance, address: string) =>
            call(on.url, 'GET', `/v1/almanac/agents/${address}`);
          const publish = async (on: Instance, address: string, published: boolean) => {
            const res = await call(on.url, 'PUT', `/v2/agents/${address}/federation`, {
              key: on.userKey,
              body: { published },
            });
            assert.equal(res.status, 200, `${on.name}: publish ${address}: ${res.text}`);
          };
          const agentsSaid = () =>
            `--- A1 ---\n${agentA?.output()}\n--- B1 ---\n${agentB?.output()}\n--- A ---\n${a.output()}\n--- B ---\n${b.output()}`;

          it('registers each agent on its own instance only', async () => {
            assert.equal((await lookUp(a, a1)).status, 200);
            assert.equal((await lookUp(b, b1)).status, 200);
          });

          it('resolves a published agent of the peer on A, with B as its home', async () => {
            await publish(b, b1, true);
            await publish(a, a1, true);
            const res = await lookUp(a, b1);
            assert.equal(res.status, 200, res.text);
            assert.equal(res.headers.get('x-agentry-home'), b.url);
            assert.ok(res.text.includes(`${b.url}/v2/agents/mailbox/submit`), res.text);
            const back = await lookUp(b, a1);
            assert.equal(back.status, 200, back.text);
            assert.equal(back.headers.get('x-agentry-home'), a.url);
          });

          it('carries A1’s message to B1 and B1’s reply back, across the namespaces', async () => {
            writeFileSync(outboxOf('a1'), b1);
            const sent = await waitFor(
              () => agentA!.lines.find((line) => line.sent === b1),
              'A1 to send',
              90_000,
            ).catch((err: Error) => assert.fail(`${err.message}\n${agentsSaid()}`));
            assert.equal(sent.status, 'delivered', `${JSON.stringify(sent)}\n${agentsSaid()}`);
            const ping = await waitFor(
              () => agentB!.lines.find((line) => line.ping !== undefined),
              'B1 to hear the ping',
              60_000,
            ).catch((err: Error) => assert.fail(`${err.message}\n${agentsSaid()}`));
            assert.equal(ping.sender, a1);
            const replied = await waitFor(
              () => agentB!.lines.find((line) => line.replied === a1),
              'B1 to reply',
              90_000,
            ).catch((err: Error) => assert.fail(`${err.message}\n${agentsSaid()}`));
            assert.equal(
              replied.status,
              'delivered',
              `${JSON.stringify(replied)}\n${agentsSaid()}`,
            );
            const pong = await waitFor(
              () => agentA!.lines.find((line) => line.pong !== undefined),
              'A1 to hear the reply',
              60_000,
            ).catch((err: Error) => assert.fail(`${err.message}\n${agentsSaid()}`));
            assert.deepEqual(
              [pong.sender, pong.pong],
              [b1, 'pong: hello from the other namespace'],
            );
          });

          it('shows the hop in both traces, from the other instance', async () => {
            const trace = async (on: Instance, address: string) => {
              const res = await call(on.url, 'GET', `/v2/agents/${address}/deliveries`, {
                key: on.userKey,
              });
              assert.equal(res.status, 200, res.text);
              return res.body as DeliveryEventView[];
            };
            const hop = (rows: DeliveryEventView[], sender: string, home: string) =>
              rows.find(
                (row) =>
                  row.event === 'submitted' &&
                  row.sender === sender &&
                  (row.detail ?? '').includes(`from ${home}`),
              );
            const atB = await waitFor(async () => hop(await trace(b, b1), a1, a.url), 'B’s trace');
            assert.equal(atB.address, b1);
            const atA = await waitFor(async () => hop(await trace(a, a1), b1, b.url), 'A’s trace');
            assert.equal(atA.address, a1);
          });

          it('gives a caller that is not a peer nothing of B’s published agents', async () => {
            // From the root namespace: unsigned, with a made-up key, and signed by an agent
            // key that is none of B's peers (as a peer signs, with its instance's key).
            const callers: Record<string, string>[] = [
              {},
              { authorization: `Bearer ${randomBytes(32).toString('hex')}` },
              { authorization: TestIdentity.random().authorization() },
            ];
            for (const headers of callers) {
              const res = await call(b.url, 'GET', `/v2/federation/agents/${b1}`, { headers });
              assert.ok(res.status >= 400 && res.status < 500, `${res.status} ${res.text}`);
              assert.ok(!res.text.includes('/v2/agents/mailbox/submit'), res.text);
            }
          });

          it('forgets B1 on A within the cache time once B unpublishes it', async () => {
            await publish(b, b1, false);
            const unpublished = Date.now();
            await waitFor(
              async () => ((await lookUp(a, b1)).status === 404 ? true : undefined),
              'A to answer 404 for the unpublished agent',
              CACHE_SECONDS * 1000 + 30_000,
            );
            assert.equal((await lookUp(a, b1)).status, 404, `${Date.now() - unpublished} ms on`);
          });
        },
      );
    });
  },
);

/** The port of the PostgreSQL test server (its socket file is named by it). */
function pgPort(): string {
  return testPgUrl ? new URL(testPgUrl).port || '5432' : '5432';
}

/**
 * The database of one instance: a SQLite file in `dir`, or a scratch schema on the PostgreSQL
 * test server, reached through its Unix socket (the same server as the test's TCP URL).
 */
async function databaseUrl(
  dialect: 'sqlite' | 'postgres',
  dir: string,
  databases: TestDatabase[],
): Promise<string> {
  if (dialect === 'sqlite') return `sqlite:${join(dir, 'agentry.db')}`;
  const database = await createTestDatabase('postgres');
  databases.push(database);
  const tcp = new URL(database.url);
  const socket = new URLSearchParams(tcp.searchParams);
  socket.set('host', PG_SOCKET_DIR);
  // The host in the URL is only there to make it a URL: the query's host (the socket) wins.
  return `postgres://${tcp.username || 'postgres'}@localhost:${pgPort()}${tcp.pathname}?${socket}`;
}
