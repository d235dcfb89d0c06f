import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { loadConfig } from '../../src/config/index.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call, type CallOptions, type JsonResponse } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';

const AGENT_PY = `from uagents import Context

@agent.on_interval(period=5.0)
async def tick(ctx: Context):
    ctx.logger.info("tick")
`;

const codeOf = (files: { name: string; value: string; language?: string }[]) =>
  JSON.stringify(files.map((file) => ({ language: 'python', ...file })));
const CODE = codeOf([{ name: 'agent.py', value: AGENT_PY }]);

/** Hosting settings with a key of their own: PostgreSQL has no file to keep one in. */
function hostingWithKey() {
  return { ...loadConfig({}, {}).hosting, key: randomBytes(32).toString('hex') };
}

describeOnEachDialect('Hosting API', (dialect) => {
  let t: TestServer;
  let bobKey: string;
  let carolKey: string;
  /** Every answer the tests got, to look for a seed in. */
  const answers: string[] = [];

  before(async () => {
    t = await startTestServer({
      dialect,
      config: { hosting: { ...hostingWithKey(), storageKeys: 5, storageBytes: 4096 } },
    });
    bobKey = await t.addUser('bob');
    carolKey = await t.addUser('carol');
  });
  after(() => t.close());

  const hosting = () => t.server.ctx.services.hosting;

  async function send<T = any>(
    method: string,
    path: string,
    options: CallOptions = {},
  ): Promise<JsonResponse<T>> {
    const res = await call<T>(t.url, method, path, { key: t.userKey, ...options });
    answers.push(res.text);
    return res;
  }

  async function create(name: string, options: CallOptions = {}, base = '/v1/hosting') {
    const res = await send('POST', `${base}/agents`, { body: { name }, ...options });
    assert.equal(res.status, 200, res.text);
    return res.body.address as string;
  }

  it('runs the deploy flow: create, code, secret, start, state, logs, stop, delete', async () => {
    const created = await send('POST', '/v1/hosting/agents', {
      body: { name: 'Weather', short_description: 'says if it rains', network: 'testnet' },
    });
    assert.equal(created.status, 200, created.text);
    const agent = created.body;
    assert.match(agent.address, /^agent1[02-9ac-hj-np-z]{59}$/);
    assert.deepEqual(
      [agent.name, agent.running, agent.state, agent.revision, agent.prefix, agent.code_digest],
      ['Weather', false, 'stopped', 0, 'test-agent', null],
    );
    assert.equal(agent.short_description, 'says if it rains');
    const address = agent.address as string;

    // An ordinary agent of its owner: listed, with a mailbox.
    const listing = await send('GET', `/v2/agents/${address}`);
    assert.equal(listing.status, 200, listing.text);
    assert.equal(listing.body.name, 'Weather');
    const mailbox = await send('GET', `/v2/agents/${address}/mailbox`);
    assert.equal(mailbox.status, 200, mailbox.text);

    const start = await send('POST', `/v1/hosting/agents/${address}/start`);
    assert.equal(start.status, 409, start.text);
    // Said as the console and a script both understand it: no call to make.
    assert.equal(
      start.body.detail,
      `Hosted agent ${address} has no code yet: save its code (an agent.py) before starting it`,
    );

    const put = await send('PUT', `/v1/hosting/agents/${address}/code`, { body: { code: CODE } });
    assert.equal(put.status, 200, put.text);
    assert.equal(put.body.digest, createHash('sha256').update(CODE).digest('hex'));
    const code = await send('GET', `/v1/hosting/agents/${address}/code`);
    assert.deepEqual([code.body.code, code.body.digest], [CODE, put.body.digest]);
    assert.ok(code.body.timestamp);

    const secret = await send('POST', '/v1/hosting/secrets', {
      body: { address, name: 'WEATHER_API_KEY', secret: 'sk-live-123' },
    });
    assert.equal(secret.status, 200, secret.text);
    assert.equal(secret.body.name, 'WEATHER_API_KEY');
    assert.notEqual(secret.body.secret, 'sk-live-123');
    const secrets = await send('GET', `/v1/hosting/${address}/secrets`);
    assert.deepEqual(
      secrets.body.secrets.map((s: { name: string }) => s.name),
      ['WEATHER_API_KEY'],
    );
    assert.ok(!secrets.text.includes('sk-live-123'));
    const all = await send('GET', '/v1/hosting/secrets');
    assert.ok(
      all.body.secrets.some(
        (s: { address: string; name: string }) =>
          s.address === address && s.name === 'WEATHER_API_KEY',
      ),
    );

    const started = await send('POST', `/v1/hosting/agents/${address}/start`);
    assert.equal(started.status, 200, started.text);
    assert.deepEqual([started.body.running, started.body.state], [true, 'stopped']);
    assert.match(started.body.state_reason, /Waiting for a runner: none is running/);
    assert.equal(started.body.revision, 1);

    // A runner takes it, starts it and reports.
    const runner = hosting();
    await runner.heartbeat('runner-1', 'test', 10);
    assert.ok((await runner.claim('runner-1', 10, 30_000)).includes(address));
    const spec = await runner.runSpec(address);
    assert.deepEqual(spec.secrets, { WEATHER_API_KEY: 'sk-live-123' });
    await runner.setState(address, 'compiling', null);
    await runner.setState(address, 'running', null);
    await runner.appendLogs(address, [
      { time: new Date(), level: 'info', type: 'execution', entry: 'INFO: [Weather]: tick' },
      { time: new Date(), level: 'erro', type: 'execution', entry: 'ValueError: no rain' },
    ]);
    const running = await send('GET', `/v1/hosting/agents/${address}`);
    assert.deepEqual(
      [running.body.running, running.body.state, running.body.compiled, running.body.state_reason],
      [true, 'running', true, null],
    );
    const logs = await send('GET', `/v1/hosting/agents/${address}/logs/latest`);
    assert.equal(logs.status, 200, logs.text);
    assert.deepEqual(
      logs.body.map((l: { log_entry: string; log_level: string; log_type: string }) => [
        l.log_entry,
        l.log_level,
        l.log_type,
      ]),
      [
        ['INFO: [Weather]: tick', 'info', 'execution'],
        ['ValueError: no rain', 'erro', 'execution'],
      ],
    );
    const timeline = await send('GET', `/v2/agents/${address}/activity`);
    const summaries = timeline.body.entries.map((e: { kind: string; summary: string }) => e.kind);
    assert.ok(summaries.includes('event.error'), timeline.text);
    assert.match(timeline.text, /Hosted agent running/);
    assert.match(timeline.text, /ValueError: no rain/);
    const status = await send('GET', `/v2/agents/${address}`);
    assert.equal(status.body.status.status, 'failing');
    assert.match(status.body.status.reason, /ValueError: no rain/);

    // Stopping: the runner that holds it sees it, stops it and says so.
    const stopping = await send('POST', `/v1/hosting/agents/${address}/stop`);
    assert.deepEqual([stopping.body.running, stopping.body.state], [false, 'running']);
    const held = await runner.renew('runner-1', 30_000);
    assert.equal(held.find((h) => h.address === address)?.desired, 'stopped');
    await runner.setState(address, 'stopped', 'Stopped by its owner');
    await runner.release('runner-1', address);
    const stopped = await send('GET', `/v1/hosting/agents/${address}`);
    assert.deepEqual(
      [stopped.body.running, stopped.body.state, stopped.body.state_reason],
      [false, 'stopped', 'Stopped by its owner'],
    );

    assert.equal((await send('DELETE', `/v1/hosting/agents/${address}/logs`)).status, 200);
    assert.deepEqual((await send('GET', `/v1/hosting/agents/${address}/logs/latest`)).body, []);

    const deleted = await send('DELETE', `/v1/hosting/agents/${address}`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal((await send('GET', `/v1/hosting/agents/${address}`)).status, 404);
    assert.equal((await send('GET', `/v2/agents/${address}`)).status, 404);
    assert.ok(!(await runner.renew('runner-1', 30_000)).some((h) => h.address === address));

    // The seed was never in any answer.
    assert.ok(answers.every((text) => !text.includes(spec.seed)));
  });

  it('lists the owner’s agents by name, creation or change, a page at a time', async () => {
    const owner = await t.addUser('lister');
    for (const name of ['bravo', 'alpha', 'charlie']) await create(name, { key: owner });
    const list = await send('GET', '/v1/hosting/agents', { key: owner });
    assert.deepEqual(
      list.body.items.map((a: { name: string }) => a.name),
      ['bravo', 'alpha', 'charlie'],
    );
    assert.equal(list.body.next_cursor, null);
    const byName = await send('GET', '/v1/hosting/agents?sort_by=-name', { key: owner });
    assert.deepEqual(
      byName.body.items.map((a: { name: string }) => a.name),
      ['charlie', 'bravo', 'alpha'],
    );
    const desc = await send('GET', '/v1/hosting/agents?sort_by=name&direction=desc', {
      key: owner,
    });
    assert.deepEqual(desc.body.items, byName.body.items);
    const filtered = await send('GET', '/v1/hosting/agents?name=RAV', { key: owner });
    assert.deepEqual(
      filtered.body.items.map((a: { name: string }) => a.name),
      ['bravo'],
    );
    const later = await send('GET', '/v1/hosting/agents?cursor=2', { key: owner });
    assert.deepEqual(
      later.body.items.map((a: { name: string }) => a.name),
      ['charlie'],
    );
    for (const pattern of ['%25', '_', '%5C']) {
      const none = await send('GET', `/v1/hosting/agents?name=${pattern}`, { key: owner });
      assert.deepEqual(none.body.items, [], `name=${pattern} is text, not a pattern`);
    }
    const bad = await send('GET', '/v1/hosting/agents?sort_by=size', { key: owner });
    assert.equal(bad.status, 422, bad.text);
  });

  it('refuses bad code, file names and secret names with 422 saying what is wrong', async () => {
    const address = await create('picky');
    const refused = async (code: string, message: RegExp) => {
      const res = await send('PUT', `/v1/hosting/agents/${address}/code`, { body: { code } });
      assert.equal(res.status, 422, res.text);
      assert.match(res.body.detail[0].msg, message);
      assert.deepEqual(res.body.detail[0].loc.slice(0, 2), ['body', 'code']);
    };
    await refused('print("not json")', /JSON string of a list of files/);
    await refused('{"agent.py": "x"}', /JSON list of files/);
    await refused(codeOf([{ name: 'main.py', value: 'x' }]), /named "agent.py"/);
    await refused(
      codeOf([
        { name: 'agent.py', value: 'x' },
        { name: '../escape.py', value: 'x' },
      ]),
      /Bad file name/,
    );
    await refused(
      codeOf([
        { name: 'agent.py', value: 'x' },
        { name: '.git/config', value: 'x' },
      ]),
      /Bad file name/,
    );
    await refused(codeOf([{ name: '/etc/agent.py', value: 'x' }]), /Bad file name/);
    const code = await send('GET', `/v1/hosting/agents/${address}/code`);
    assert.deepEqual(code.body, { digest: null, code: null, timestamp: null });

    for (const name of ['1st', 'has-dash', 'AGENTRY_AGENT_SEED', 'white space']) {
      const res = await send('POST', '/v1/hosting/secrets', {
        body: { address, name, secret: 'v' },
      });
      assert.equal(res.status, 422, `${name}: ${res.text}`);
      assert.match(res.body.detail[0].msg, /Python identifier|AGENTRY_/);
    }
    const missing = await send('DELETE', `/v1/hosting/secrets/${address}/NOPE`);
    assert.equal(missing.status, 404, missing.text);
  });

  it('refuses bad bodies, queries and addresses on the other routes with 422, storing nothing', async () => {
    const address = await create('strict');
    const before = await send('GET', `/v1/hosting/agents/${address}`);
    const refused = async (method: string, path: string, body: unknown, where: string) => {
      const res = await send(method, path, { body });
      assert.equal(res.status, 422, `${method} ${path}: ${res.text}`);
      assert.ok(
        res.body.detail.some((item: { loc: string[] }) => item.loc.includes(where)),
        `${method} ${path} names ${where}: ${res.text}`,
      );
    };
    // Creating: a name is required and bounded; the network is one of two.
    await refused('POST', '/v1/hosting/agents', {}, 'name');
    await refused('POST', '/v1/hosting/agents', { name: '' }, 'name');
    await refused('POST', '/v1/hosting/agents', { name: 'x'.repeat(33) }, 'name');
    await refused('POST', '/v1/hosting/agents', { name: 'n', network: 'moon' }, 'network');
    await refused('POST', `/v1/hosting/agents/${address}/duplicate`, { name: 7 }, 'name');
    // Changing: each field is text of its bound.
    await refused('PUT', `/v1/hosting/agents/${address}`, { name: ['list'] }, 'name');
    await refused('PUT', `/v1/hosting/agents/${address}`, { readme: 'r'.repeat(80_001) }, 'readme');
    await refused('PUT', `/v1/hosting/agents/${address}/network`, { network: 'moon' }, 'network');
    await refused('PUT', `/v1/hosting/agents/${address}/code`, {}, 'code');
    await refused('PUT', `/v1/hosting/agents/${address}/storage/k`, { value: 1 }, 'value');
    await refused('POST', '/v1/hosting/secrets', { address, name: 'TOKEN' }, 'secret');
    // Listing: sort, direction and cursor as documented.
    for (const [query, where] of [
      ['sort_by=size', 'sort_by'],
      ['direction=up', 'direction'],
      ['cursor=abc', 'cursor'],
    ]) {
      const res = await send('GET', `/v1/hosting/agents?${query}`);
      assert.equal(res.status, 422, `${query}: ${res.text}`);
      assert.ok(res.body.detail.some((item: { loc: string[] }) => item.loc.includes(where!)));
    }
    // An address that is none: refused before anything is looked up.
    for (const [method, path] of [
      ['GET', '/v1/hosting/agents/agent1nope'],
      ['POST', '/v1/hosting/agents/agent1nope/start'],
      ['GET', '/v1/hosting/agent1nope/secrets'],
      ['GET', '/v1/hosting/agents/agent1nope/storage'],
    ]) {
      const res = await send(method!, path!);
      assert.equal(res.status, 422, `${method} ${path}: ${res.text}`);
    }
    // Nothing of it was kept: the agent is as it was, and there is no second one.
    assert.deepEqual((await send('GET', `/v1/hosting/agents/${address}`)).body, before.body);
    const listed = await send('GET', '/v1/hosting/agents?name=strict');
    assert.equal(listed.body.items.length, 1, listed.text);
    assert.equal((await send('GET', `/v1/hosting/agents/${address}/storage/k`)).status, 404);
  });

  it('keeps an agent’s storage within its bounds, and answers it in pages', async () => {
    const address = await create('keeper');
    const base = `/v1/hosting/agents/${address}/storage`;
    for (const key of ['a', 'b', 'c']) {
      const res = await send('PUT', `${base}/${key}`, { body: { value: `"${key}"` } });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, { key, value: `"${key}"` });
    }
    assert.deepEqual((await send('GET', `${base}/b`)).body, { key: 'b', value: '"b"' });
    const page = await send('GET', base);
    assert.deepEqual(page.body, {
      items: [
        { key: 'a', value: '"a"' },
        { key: 'b', value: '"b"' },
        { key: 'c', value: '"c"' },
      ],
      next_cursor: null,
    });
    const oversize = await send('PUT', `${base}/big`, { body: { value: 'x'.repeat(5000) } });
    assert.equal(oversize.status, 413, oversize.text);
    assert.match(oversize.body.detail, /at most 4096 bytes/);
    await send('PUT', `${base}/d`, { body: { value: '1' } });
    await send('PUT', `${base}/e`, { body: { value: '1' } });
    const sixth = await send('PUT', `${base}/f`, { body: { value: '1' } });
    assert.equal(sixth.status, 413, sixth.text);
    assert.match(sixth.body.detail, /at most 5 keys/);
    assert.equal((await send('DELETE', `${base}/a`)).status, 200);
    assert.equal((await send('GET', `${base}/a`)).status, 404);
    assert.equal((await send('DELETE', `${base}/a`)).status, 404);
    // What the agent itself keeps (through its runner) is the same storage.
    assert.equal(await hosting().storageGet(address, 'b'), '"b"');
    await hosting().storageSet(address, 'café key/1', '{"n": 1}');
    const spelled = await send('GET', `${base}/${encodeURIComponent('café key/1')}`);
    assert.deepEqual(spelled.body, { key: 'café key/1', value: '{"n": 1}' });
  });

  it('answers another user 404 about an agent, as for none at all', async () => {
    const address = await create('private');
    await send('PUT', `/v1/hosting/agents/${address}/code`, { body: { code: CODE } });
    const asBob = (method: string, path: string, body?: unknown) =>
      send(method, path, { key: bobKey, body });
    for (const [method, path, body] of [
      ['GET', `/v1/hosting/agents/${address}`],
      ['GET', `/v1/hosting/agents/${address}/code`],
      ['PUT', `/v1/hosting/agents/${address}/code`, { code: CODE }],
      ['PUT', `/v1/hosting/agents/${address}`, { name: 'taken over' }],
      ['POST', `/v1/hosting/agents/${address}/start`],
      ['POST', `/v1/hosting/agents/${address}/duplicate`, { name: 'copy' }],
      ['GET', `/v1/hosting/agents/${address}/logs/latest`],
      ['GET', `/v1/hosting/agents/${address}/storage`],
      ['POST', '/v1/hosting/secrets', { address, name: 'X', secret: 'y' }],
      ['DELETE', `/v1/hosting/agents/${address}`],
    ] as const) {
      const res = await asBob(method, path, body);
      assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
      assert.match(res.body.detail, /not found/);
    }
    const mine = await send('GET', `/v1/hosting/agents/${address}`);
    assert.equal(mine.body.name, 'private');
    assert.equal(mine.body.revision, 1);
    const bobs = await send('GET', '/v1/hosting/agents', { key: bobKey });
    assert.ok(!bobs.body.items.some((a: { address: string }) => a.address === address));
  });

  it('acts for a team under /v1/hosting/teams/{slug} and with x-team, for members only', async () => {
    const team = await send('POST', '/v2/teams', { body: { slug: 'hosts' } });
    assert.equal(team.status, 201, team.text);
    await send('POST', '/v2/teams/hosts/members', { body: { user: 'carol' } });
    const address = await create('teamed', {}, '/v1/hosting/teams/hosts');
    const listing = await send('GET', `/v2/agents/${address}`, { headers: { 'x-team': 'hosts' } });
    assert.equal(listing.status, 200, listing.text);

    const byPath = await send('GET', `/v1/hosting/teams/hosts/agents/${address}`, {
      key: carolKey,
    });
    assert.equal(byPath.status, 200, byPath.text);
    const byHeader = await send('GET', `/v1/hosting/agents/${address}`, {
      key: carolKey,
      headers: { 'x-team': 'hosts' },
    });
    assert.equal(byHeader.status, 200, byHeader.text);
    const list = await send('GET', '/v1/hosting/teams/hosts/agents', { key: carolKey });
    assert.deepEqual(
      list.body.items.map((a: { address: string }) => a.address),
      [address],
    );
    const put = await send('PUT', `/v1/hosting/teams/hosts/agents/${address}/code`, {
      key: carolKey,
      body: { code: CODE },
    });
    assert.equal(put.status, 200, put.text);
    const secret = await send('POST', '/v1/hosting/teams/hosts/secrets', {
      key: carolKey,
      body: { address, name: 'TEAM_TOKEN', secret: 'x' },
    });
    assert.equal(secret.status, 200, secret.text);
    const secrets = await send('GET', `/v1/hosting/teams/hosts/${address}/secrets`, {
      key: carolKey,
    });
    assert.deepEqual(
      secrets.body.secrets.map((s: { name: string }) => s.name),
      ['TEAM_TOKEN'],
    );

    // Not the members' own: nor anyone else's.
    assert.equal(
      (await send('GET', `/v1/hosting/agents/${address}`, { key: carolKey })).status,
      404,
    );
    const bob = await send('GET', `/v1/hosting/teams/hosts/agents/${address}`, { key: bobKey });
    assert.equal(bob.status, 404, bob.text);
    assert.match(bob.body.detail, /No team "hosts" among yours/);
    const bobList = await send('GET', '/v1/hosting/teams/hosts/agents', { key: bobKey });
    assert.equal(bobList.status, 404, bobList.text);
    const mine = await send('GET', '/v1/hosting/agents');
    assert.ok(!mine.body.items.some((a: { address: string }) => a.address === address));

    // The team's own key acts for it under the team's path too.
    const teamKey = await send('POST', '/v2/api-keys', {
      headers: { 'x-team': 'hosts' },
      body: {},
    });
    assert.equal(teamKey.status, 200, teamKey.text);
    const asTeam = await send('GET', `/v1/hosting/teams/hosts/agents/${address}`, {
      key: teamKey.body.key,
    });
    assert.equal(asTeam.status, 200, asTeam.text);

    const gone = await send('DELETE', `/v1/hosting/teams/hosts/agents/${address}`, {
      key: carolKey,
    });
    assert.equal(gone.status, 200, gone.text);
  });

  it('lets a read-only key read and nothing more, and a key for other agents nothing', async () => {
    const address = await create('scoped');
    const made = await send('POST', '/v2/api-keys', { body: { read_only: true } });
    const readOnly = made.body.key as string;
    assert.equal(
      (await send('GET', `/v1/hosting/agents/${address}`, { key: readOnly })).status,
      200,
    );
    const write = await send('PUT', `/v1/hosting/agents/${address}/code`, {
      key: readOnly,
      body: { code: CODE },
    });
    assert.equal(write.status, 403, write.text);
    const other = await send('POST', '/v2/api-keys', {
      body: { addresses: [await create('another')] },
    });
    const res = await send('GET', `/v1/hosting/agents/${address}`, { key: other.body.key });
    assert.equal(res.status, 403, res.text);
    const secret = await send('POST', '/v1/hosting/secrets', {
      key: other.body.key,
      body: { address, name: 'X', secret: 'y' },
    });
    assert.equal(secret.status, 403, secret.text);
  });

  it('deletes everything hosted when the agent is deleted through /v2/agents', async () => {
    const address = await create('v2-deleted');
    await send('PUT', `/v1/hosting/agents/${address}/code`, { body: { code: CODE } });
    await send('PUT', `/v1/hosting/agents/${address}/storage/k`, { body: { value: 'v' } });
    const res = await send('DELETE', `/v2/agents/${address}`);
    assert.equal(res.status, 200, res.text);
    assert.equal((await send('GET', `/v1/hosting/agents/${address}`)).status, 404);
    assert.equal(await hosting().storageGet(address, 'k'), undefined);
    assert.equal(await t.server.ctx.store.repos.hosting.find(address), undefined);
  });

  it('changes the name and profile given, and counts the change in the revision', async () => {
    const address = await create('before');
    const put = await send('PUT', `/v1/hosting/agents/${address}`, {
      body: { name: 'after', readme: '# Hello', short_description: null },
    });
    assert.equal(put.status, 200, put.text);
    assert.deepEqual(put.body, {});
    const agent = await send('GET', `/v1/hosting/agents/${address}`);
    assert.deepEqual(
      [agent.body.name, agent.body.readme, agent.body.short_description, agent.body.revision],
      ['after', '# Hello', null, 1],
    );
    const network = await send('PUT', `/v1/hosting/agents/${address}/network`, {
      body: { network: 'mainnet' },
    });
    assert.equal(network.status, 200, network.text);
    const moved = await send('GET', `/v1/hosting/agents/${address}`);
    assert.deepEqual([moved.body.network, moved.body.prefix], ['mainnet', 'agent']);
    const listing = await send('GET', `/v2/agents/${address}`);
    assert.equal(listing.body.name, 'after');
  });

  it('duplicates an agent with its code, under a key of its own', async () => {
    const address = await create('original');
    await send('PUT', `/v1/hosting/agents/${address}/code`, { body: { code: CODE } });
    const copy = await send('POST', `/v1/hosting/agents/${address}/duplicate`, {
      body: { name: 'copy' },
    });
    assert.equal(copy.status, 200, copy.text);
    assert.notEqual(copy.body.address, address);
    assert.equal(copy.body.name, 'copy');
    const code = await send('GET', `/v1/hosting/agents/${copy.body.address}/code`);
    assert.equal(code.body.code, CODE);
    const profile = await send('GET', `/v1/hosting/agents/${copy.body.address}/profile`);
    assert.equal(profile.status, 200, profile.text);
    assert.equal(profile.body.author_username, 'admin');
  });
});

describeOnEachDialect('Hosting API without a hosting key', (dialect) => {
  it(
    dialect === 'postgres'
      ? 'answers 503 naming AGENTRY_HOSTING_KEY to a new agent or secret'
      : 'makes a key beside the SQLite database and hosts',
    async () => {
      const t = await startTestServer({ dialect });
      try {
        const res = await call(t.url, 'POST', '/v1/hosting/agents', {
          key: t.userKey,
          body: { name: 'keyless' },
        });
        if (dialect === 'postgres') {
          assert.equal(res.status, 503, res.text);
          assert.match(res.body.detail, /AGENTRY_HOSTING_KEY/);
          const agents = await call(t.url, 'GET', '/v2/agents', { key: t.userKey });
          assert.deepEqual(agents.body, []);
          // The console says so before anyone tries, with the setting that lets them.
          const status = await call(t.url, 'GET', '/v1/hosting/status', { key: t.userKey });
          assert.equal(status.status, 200, status.text);
          assert.deepEqual(status.body, {
            ready: false,
            runners: 0,
            python: null,
            reason: 'this database has no hosting key to seal the agents’ keys with',
            enable: 'AGENTRY_HOSTING_KEY=$(openssl rand -hex 32)',
          });
        } else {
          assert.equal(res.status, 200, res.text);
        }
      } finally {
        await t.close();
      }
    },
  );
});

describeOnEachDialect('Hosting status', (dialect) => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ dialect, config: { hosting: hostingWithKey() } });
  });
  after(() => t.close());

  it('says hosted agents cannot run without a runner, why, and the setting; ready once one is alive', async () => {
    const before = await call(t.url, 'GET', '/v1/hosting/status', { key: t.userKey });
    assert.equal(before.status, 200, before.text);
    assert.deepEqual(before.body, {
      ready: false,
      runners: 0,
      python: null,
      reason: 'AGENTRY_HOSTING_PYTHON is not set',
      enable: 'AGENTRY_HOSTING_PYTHON=<a Python with uagents installed>',
    });
    // An agent started meanwhile waits, and says for what.
    const made = await call(t.url, 'POST', '/v1/hosting/agents', {
      key: t.userKey,
      body: { name: 'waiting' },
    });
    const address = made.body.address as string;
    await call(t.url, 'PUT', `/v1/hosting/agents/${address}/code`, {
      key: t.userKey,
      body: { code: CODE },
    });
    const started = await call(t.url, 'POST', `/v1/hosting/agents/${address}/start`, {
      key: t.userKey,
    });
    assert.equal(
      started.body.state_reason,
      'Waiting for a runner: none is running (AGENTRY_HOSTING_PYTHON is not set; to run hosted agents: AGENTRY_HOSTING_PYTHON=<a Python with uagents installed>)',
    );

    // A runner (an `agentry runner` elsewhere, say) says it is alive.
    await t.server.ctx.services.hosting.heartbeat('runner-elsewhere', 'other-host', 10);
    const after = await call(t.url, 'GET', '/v1/hosting/status', { key: t.userKey });
    assert.deepEqual(after.body, {
      ready: true,
      runners: 1,
      python: null,
      reason: null,
      enable: null,
    });
  });

  it('refuses a query it does not take with 422', async () => {
    const res = await call(t.url, 'GET', '/v1/hosting/status?no_cache=perhaps', {
      key: t.userKey,
    });
    assert.equal(res.status, 422, res.text);
    assert.deepEqual(res.body.detail[0].loc, ['query', 'no_cache']);
  });
});
