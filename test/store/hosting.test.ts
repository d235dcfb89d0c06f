import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { loadConfig, type Config } from '../../src/config/index.js';
import { createContext, type AppContext } from '../../src/context.js';
import { agentAddressFromSeed, seal, unseal } from '../../src/crypto/index.js';
import { ServiceUnavailableError } from '../../src/errors.js';
import { sqlitePath } from '../../src/store/database.js';
import { createLogger } from '../../src/logger.js';
import { parseCode, type HostingService } from '../../src/services/hosting/index.js';
import { createTestDatabase, type TestDatabase } from '../kit/databases.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { ManualClock } from '../kit/server.js';
import { insertUser } from '../kit/store.js';

const code = (agentPy = 'print("hello")', more: object[] = []) =>
  JSON.stringify([{ name: 'agent.py', value: agentPy, language: 'python' }, ...more]);

/** A context over a fresh database: the services as a serving process builds them. */
async function openContext(
  database: TestDatabase,
  clock: ManualClock,
  hosting: Partial<Config['hosting']> = {},
): Promise<AppContext> {
  const base = loadConfig({ databaseUrl: database.url, logLevel: 'silent' }, {});
  const config: Config = {
    ...base,
    verifierThreads: 0,
    hosting: { ...base.hosting, ...hosting },
  };
  const ctx = createContext(config, { clock, logger: createLogger({ level: 'silent' }) });
  await ctx.store.migrate();
  return ctx;
}

describeOnEachDialect('hosting store', (dialect) => {
  let database: TestDatabase;
  let ctx: AppContext;
  let hosting: HostingService;
  const clock = new ManualClock(1_790_000_000_000);
  before(async () => {
    database = await createTestDatabase(dialect);
    ctx = await openContext(database, clock, {
      key: randomBytes(32).toString('hex'),
      logLines: 5,
      storageKeys: 3,
      storageBytes: 1024,
    });
    hosting = ctx.services.hosting;
  });
  after(async () => {
    await ctx.close();
    await database.drop();
  });

  async function newAgent(owner: string, name = 'hosted') {
    return hosting.create(owner, { name });
  }

  async function startable(owner: string, name = 'hosted') {
    const agent = await newAgent(owner, name);
    await hosting.setCode(owner, agent.address, code());
    await hosting.start(owner, agent.address);
    return agent.address;
  }

  it('makes an ordinary agent of its owner, with its seed sealed and kept from every answer', async () => {
    const owner = await insertUser(ctx.store);
    const agent = await hosting.create(owner, { name: 'Weather', short_description: 'rain' });
    const listing = await ctx.store.repos.agents.find(agent.address);
    assert.equal(listing?.user_id, owner);
    assert.equal(listing?.name, 'Weather');
    assert.equal(listing?.profile.description, 'rain');
    assert.equal((await ctx.store.repos.identities.find(agent.address))?.user_id, owner);
    assert.ok(await ctx.store.repos.agents.isRegistered(agent.address));
    assert.deepEqual(
      [agent.state, agent.desiredState, agent.network, agent.revision, agent.codeDigest],
      ['stopped', 'stopped', 'testnet', 0, null],
    );
    await hosting.setCode(owner, agent.address, code());
    const spec = await hosting.runSpec(agent.address);
    assert.equal(agentAddressFromSeed(spec.seed, 0), agent.address);
    const row = await ctx.store.repos.hosting.find(agent.address);
    assert.ok(row && !row.seed_ciphertext.includes(spec.seed));
    assert.ok(!JSON.stringify(agent).includes(spec.seed));
  });

  it('gives each agent meant to run to one runner, up to its room, until its lease runs out', async () => {
    const owner = await insertUser(ctx.store);
    const addresses: string[] = [];
    for (let i = 0; i < 3; i++) addresses.push(await startable(owner, `lease${i}`));
    const idle = await newAgent(owner, 'idle');

    const [first, second] = await Promise.all([
      hosting.claim('runner-a', 2, 10_000),
      hosting.claim('runner-b', 2, 10_000),
    ]);
    const taken = [...first, ...second];
    assert.equal(new Set(taken).size, taken.length, 'no agent is held twice');
    assert.ok(!taken.includes(idle.address), 'a stopped agent is not claimed');
    const mine = (await hosting.claim('runner-a', 2, 10_000)).concat(first);
    assert.ok(mine.length <= 2);
    const held = await hosting.renew('runner-a', 10_000);
    assert.deepEqual(held.map((h) => h.address).sort(), [...mine].sort());
    assert.ok(held.every((h) => h.desired === 'running' && /^[0-9a-f]{64}$/.test(h.codeDigest!)));

    // runner-a stops renewing: once its lease is over, another runner takes its agents.
    clock.advance(10_001);
    await hosting.renew('runner-b', 10_000);
    const retaken = await hosting.claim('runner-b', 10, 10_000);
    assert.ok(mine.every((address) => retaken.includes(address)));
    assert.deepEqual(await hosting.renew('runner-a', 10_000), [], 'runner-a holds nothing now');

    await hosting.release('runner-b', addresses[0]!);
    const after = await hosting.renew('runner-b', 10_000);
    assert.ok(!after.some((h) => h.address === addresses[0]));
    assert.deepEqual(await hosting.claim('runner-c', 10, 10_000), [addresses[0]]);
  });

  it('tells the runner what the owner wants of each agent it holds', async () => {
    const owner = await insertUser(ctx.store);
    const address = await startable(owner, 'wants');
    await hosting.claim('runner-w', 100, 60_000);
    await hosting.setState(address, 'running', null);
    await hosting.stop(owner, address);
    const held = (await hosting.renew('runner-w', 60_000)).find((h) => h.address === address);
    assert.equal(held?.desired, 'stopped');
    // The runner holds it: the state is the runner's to change.
    assert.equal((await hosting.get(owner, address)).state, 'running');
    await hosting.delete(owner, address);
    const gone = await hosting.renew('runner-w', 60_000);
    assert.ok(!gone.some((h) => h.address === address), 'a deleted agent vanishes');
  });

  it('leaves an agent a runner is starting to that runner when started again', async () => {
    const owner = await insertUser(ctx.store);
    const address = await startable(owner, 'again');
    assert.ok((await hosting.claim('runner-s', 100, 60_000)).includes(address));
    await hosting.start(owner, address);
    assert.equal((await ctx.store.repos.hosting.find(address))?.runner_id, 'runner-s');
    assert.ok((await hosting.renew('runner-s', 60_000)).some((h) => h.address === address));
  });

  it('stops at once an agent no runner holds, saying who stopped it', async () => {
    const owner = await insertUser(ctx.store);
    const address = await startable(owner, 'unheld');
    assert.match((await hosting.get(owner, address)).stateReason ?? '', /Waiting for a runner/);
    const stopped = await hosting.stop(owner, address);
    assert.deepEqual(
      [stopped.desiredState, stopped.state, stopped.stateReason],
      ['stopped', 'stopped', 'Stopped by its owner'],
    );
    assert.ok(!(await hosting.claim('runner-u', 100, 60_000)).includes(address));
  });

  it('counts the runners heard of in the last 30 seconds', async () => {
    const before = await hosting.liveRunnerCount();
    await hosting.heartbeat('runner-live', 'host-1', 50);
    await hosting.heartbeat('runner-live', 'host-1', 40);
    assert.equal(await hosting.liveRunnerCount(), before + 1);
    clock.advance(30_001);
    assert.equal(await hosting.liveRunnerCount(), 0);
  });

  it('hands the runner the files, unsealed secrets and digest of an agent', async () => {
    const owner = await insertUser(ctx.store);
    const agent = await newAgent(owner, 'spec');
    const text = code('import helper', [
      { name: 'lib/helper.py', value: 'x = 1', language: 'python' },
    ]);
    const digest = await hosting.setCode(owner, agent.address, text);
    await hosting.putSecret(owner, { address: agent.address, name: 'API_KEY', secret: 's3cret' });
    await hosting.putSecret(owner, { address: agent.address, name: 'token', secret: 'one' });
    await hosting.putSecret(owner, { address: agent.address, name: 'token', secret: 'two' });
    const spec = await hosting.runSpec(agent.address);
    assert.equal(spec.name, 'spec');
    assert.equal(spec.codeDigest, digest);
    assert.deepEqual(
      spec.files.map((f) => f.name),
      ['agent.py', 'lib/helper.py'],
    );
    assert.deepEqual(spec.secrets, { API_KEY: 's3cret', token: 'two' });
    const rows = await ctx.store.repos.hosting.secrets(agent.address);
    assert.ok(rows.every((row) => !row.ciphertext.includes('s3cret')));
    await assert.rejects(hosting.runSpec(agentAddressFromSeed('gone', 0)), { kind: 'not-found' });
  });

  it('records state changes, with their reasons, on the agent’s timeline once', async () => {
    const owner = await insertUser(ctx.store);
    const address = await startable(owner, 'states');
    await hosting.setState(address, 'compiling', null);
    await hosting.setState(address, 'running', null);
    await hosting.setState(address, 'running', null);
    await hosting.setState(address, 'crashed', 'exit code 1', 1);
    await hosting.setState(address, 'failed', 'crashed 5 times in a minute', 5);
    const agent = await hosting.get(owner, address);
    assert.deepEqual(
      [agent.state, agent.stateReason, agent.restarts],
      ['failed', 'crashed 5 times in a minute', 5],
    );
    const events = await ctx.store.db
      .selectFrom('agent_activity')
      .select(['kind', 'category', 'message'])
      .where('address', '=', address)
      .where('kind', 'like', 'event.%')
      .orderBy('id')
      .execute();
    assert.deepEqual(
      events.map((e) => [e.kind, e.category, e.message]),
      [
        [
          'event.info',
          'system',
          'Hosted agent stopped: Waiting for a runner: none is running (AGENTRY_HOSTING_PYTHON is not set; to run hosted agents: AGENTRY_HOSTING_PYTHON=<a Python with uagents installed>)',
        ],
        ['event.info', 'system', 'Hosted agent compiling'],
        ['event.info', 'system', 'Hosted agent running'],
        // The crash and the failure are one failure: one row, its last said (failures.ts).
        [
          'event.error',
          'system',
          'Hosted agent failed: crashed 5 times in a minute (failing: 2 crashes so far)',
        ],
      ],
    );
    // Started again, a failed agent is let go so that a runner starts it afresh.
    await ctx.store.repos.hosting.update(address, {
      runner_id: 'runner-x',
      lease_expires_at: clock.now() + 60_000,
    });
    const restarted = await hosting.start(owner, address);
    assert.deepEqual([restarted.state, restarted.restarts], ['stopped', 0]);
    assert.equal((await ctx.store.repos.hosting.find(address))?.runner_id, null);
  });

  it('keeps the newest log lines, cut to size, and puts error lines on the timeline as a failure', async () => {
    const owner = await insertUser(ctx.store);
    const agent = await newAgent(owner, 'logs');
    const at = (s: number) => new Date(1_790_000_000_000 + s * 1000);
    await hosting.appendLogs(
      agent.address,
      Array.from({ length: 4 }, (_, i) => ({
        time: at(i),
        level: 'info' as const,
        type: 'execution' as const,
        entry: `line ${i}`,
      })),
    );
    await hosting.appendLogs(agent.address, [
      { time: at(4), level: 'erro', type: 'execution', entry: 'Traceback\u0000 boom' },
      { time: at(5), level: 'info', type: 'system', entry: 'x'.repeat(10_000) },
    ]);
    const lines = await hosting.latestLogs(owner, agent.address);
    assert.deepEqual(
      lines.slice(0, 4).map((l) => l.entry),
      ['line 1', 'line 2', 'line 3', 'Traceback\uFFFD boom'],
    );
    assert.equal(lines.length, 5);
    assert.equal(lines[4]!.entry.length, 4000);
    assert.deepEqual(
      lines.map((l) => [l.level, l.type]),
      [
        ['info', 'execution'],
        ['info', 'execution'],
        ['info', 'execution'],
        ['erro', 'execution'],
        ['info', 'system'],
      ],
    );
    const errors = await ctx.store.db
      .selectFrom('agent_activity')
      .select(['message', 'at'])
      .where('address', '=', agent.address)
      .where('kind', '=', 'event.error')
      .execute();
    assert.deepEqual(
      errors.map((e) => [e.message, Number(e.at)]),
      // The row of the failure its first error opened (services/hosting/failures.ts).
      [['Traceback\uFFFD boom (failing: 1 error so far)', at(4).getTime()]],
    );
    await hosting.clearLogs(owner, agent.address);
    assert.deepEqual(await hosting.latestLogs(owner, agent.address), []);
  });

  it('bounds an agent’s storage by keys and by bytes, and pages through it in key order', async () => {
    const owner = await insertUser(ctx.store);
    const { address } = await newAgent(owner, 'storage');
    await hosting.storageSet(address, 'a', '1');
    await hosting.storageSet(address, 'b', '2');
    await hosting.storageSet(address, 'c', '3');
    await assert.rejects(hosting.storageSet(address, 'd', '4'), {
      kind: 'too-large',
      message: /at most 3 keys/,
    });
    await hosting.storageSet(address, 'c', 'replaced');
    assert.equal(await hosting.storageGet(address, 'c'), 'replaced');
    await assert.rejects(hosting.storageSet(address, 'a', 'v'.repeat(1020)), {
      kind: 'too-large',
      message: /1024 bytes/,
    });
    await assert.rejects(hosting.storageSet(address, 'a', 'v'.repeat(2000)), { kind: 'too-large' });
    assert.equal(await hosting.storageGet(address, 'a'), '1');
    await hosting.storageSet(address, 'a', 'é'.repeat(400));

    const first = await hosting.storageList(address, undefined, 2);
    assert.deepEqual(
      first.items.map((i) => i.key),
      ['a', 'b'],
    );
    assert.equal(first.next, 'b');
    const second = await hosting.storageList(address, first.next!, 2);
    assert.deepEqual(second, { items: [{ key: 'c', value: 'replaced' }], next: null });

    assert.equal(await hosting.storageDelete(address, 'b'), true);
    assert.equal(await hosting.storageDelete(address, 'b'), false);
    assert.equal(await hosting.storageClear(address), 2);
    assert.equal(await hosting.storageGet(address, 'a'), undefined);
    await assert.rejects(hosting.storageSet(agentAddressFromSeed('none', 0), 'k', 'v'), {
      kind: 'not-found',
    });
    await assert.rejects(hosting.storageSet(address, 'k', 'nul\u0000'), { kind: 'validation' });
  });

  it('deletes everything hosted about an agent when its listing is deleted', async () => {
    const owner = await insertUser(ctx.store);
    const address = await startable(owner, 'cascade');
    await hosting.putSecret(owner, { address, name: 'S', secret: 'v' });
    await hosting.storageSet(address, 'k', 'v');
    await hosting.appendLogs(address, [
      { time: new Date(), level: 'info', type: 'system', entry: 'started' },
    ]);
    await ctx.services.agents.delete(owner, address);
    for (const table of [
      'hosted_agents',
      'hosting_secrets',
      'hosted_storage',
      'hosted_logs',
    ] as const) {
      const rows = await ctx.store.db
        .selectFrom(table)
        .select('address')
        .where('address', '=', address)
        .execute();
      assert.deepEqual(rows, [], `${table} keeps nothing`);
    }
  });
});

describeOnEachDialect('hosting key', (dialect) => {
  it(
    dialect === 'sqlite'
      ? 'is made once, readable by its owner alone, beside the database, and used again'
      : 'is required on PostgreSQL: without it nothing is sealed, and the answer names the setting',
    async () => {
      const database = await createTestDatabase(dialect);
      const clock = new ManualClock();
      let ctx = await openContext(database, clock);
      try {
        const owner = await insertUser(ctx.store);
        if (dialect === 'postgres') {
          await assert.rejects(
            ctx.services.hosting.create(owner, { name: 'nokey' }),
            (err: unknown) =>
              err instanceof ServiceUnavailableError && /AGENTRY_HOSTING_KEY/.test(err.message),
          );
          assert.equal((await ctx.services.agents.list(owner, 10, 0)).length, 0);
          return;
        }
        const keyFile = `${sqlitePath(database.url)}.hosting-key`;
        assert.equal(existsSync(keyFile), false, 'no key until one is needed');
        const agent = await ctx.services.hosting.create(owner, { name: 'keyed' });
        await ctx.services.hosting.setCode(owner, agent.address, code());
        assert.equal(statSync(keyFile).mode & 0o777, 0o600);
        await ctx.close();
        ctx = await openContext(database, clock);
        const spec = await ctx.services.hosting.runSpec(agent.address);
        assert.equal(agentAddressFromSeed(spec.seed, 0), agent.address);
      } finally {
        await ctx.close();
        await database.drop();
      }
    },
  );
});

describe('sealing', () => {
  it('opens only with the key and for the row it was sealed for', () => {
    const key = randomBytes(32);
    const sealed = seal(key, 'seed words', 'seed:agent1a:');
    assert.equal(unseal(key, sealed, 'seed:agent1a:'), 'seed words');
    assert.throws(() => unseal(key, sealed, 'seed:agent1b:'), /another key, or for another row/);
    assert.throws(() => unseal(randomBytes(32), sealed, 'seed:agent1a:'), /another key/);
    assert.throws(() => unseal(key, 'plain text', 'seed:agent1a:'), /not a sealed value/);
    assert.notEqual(seal(key, 'seed words', 'x'), seal(key, 'seed words', 'x'));
  });
});

describe('hosted code', () => {
  const refused = (text: string, message: RegExp) =>
    assert.throws(
      () => parseCode(text),
      (err: { kind?: string; message?: string }) => {
        assert.equal(err.kind, 'validation');
        assert.match(err.message ?? '', message);
        return true;
      },
    );

  it('takes a list of files with agent.py among them', () => {
    const files = parseCode(code('x', [{ name: 'pkg/util.py', value: '' }]));
    assert.deepEqual(files, [
      { name: 'agent.py', value: 'x', language: 'python' },
      { name: 'pkg/util.py', value: '', language: 'python' },
    ]);
  });

  it('refuses what is not such a list, with a sentence saying what is wrong', () => {
    refused('not json', /JSON string of a list of files/);
    refused('{"name": "agent.py"}', /JSON list of files/);
    refused('[]', /1 to 50 files/);
    refused(JSON.stringify([{ name: 'main.py', value: '' }]), /named "agent.py"/);
    refused(JSON.stringify([{ name: 'agent.py' }]), /needs a value/);
    refused(JSON.stringify([{ value: '' }]), /needs a name/);
    refused(
      JSON.stringify(Array.from({ length: 51 }, (_, i) => ({ name: `f${i}.py`, value: '' }))),
      /1 to 50 files/,
    );
    refused(code('x'.repeat(1024 * 1024)), /at most 1048576 bytes/);
    refused(code('x', [{ name: 'agent.py', value: '' }]), /Two files are named "agent.py"/);
  });

  it('refuses file names that could leave the agent’s directory or hide in it', () => {
    for (const name of [
      '../evil.py',
      '/etc/passwd',
      'a/../../b.py',
      '.env',
      'lib/.hidden/x.py',
      'a//b.py',
      'a\\b.py',
      '',
      'dir/',
    ]) {
      refused(code('x', [{ name, value: '' }]), /Bad file name/);
    }
  });
});
