import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/logger.js';
import { Server } from '../../src/server.js';
import { registerInAlmanac, unixSeconds } from '../kit/almanac.js';
import { createTestDatabase, type TestDatabase } from '../kit/databases.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { runAgentry } from '../kit/process.js';
import { TestIdentity } from '../kit/uagent.js';

describeOnEachDialect('command line: domains', (dialect) => {
  let database: TestDatabase;
  let db: string[];
  const first = TestIdentity.random();
  const second = TestIdentity.random();

  before(async () => {
    database = await createTestDatabase(dialect);
    db = ['--database-url', database.url];
    assert.equal(runAgentry(['migrate', ...db]).code, 0);
    for (const user of ['alice', 'bob']) {
      const res = runAgentry(['users', 'add', user, ...db]);
      assert.equal(res.code, 0, res.stderr);
    }
  });
  after(() => database.drop());

  it('claims a name for a user and assigns agents with weights', () => {
    const added = runAgentry([
      'domains',
      'add',
      'alice.agent',
      first.address,
      '--user',
      'alice',
      ...db,
    ]);
    assert.equal(added.code, 0, added.stderr);
    assert.equal(added.stdout, `alice.agent\t${first.address}\t1\n`);
    const weighted = runAgentry([
      'domains',
      'add',
      'alice.agent',
      second.address,
      '--weight',
      '3',
      '--user',
      'alice',
      ...db,
    ]);
    assert.equal(weighted.code, 0, weighted.stderr);
    const listed = runAgentry(['domains', 'list', ...db]);
    assert.equal(listed.code, 0, listed.stderr);
    const [header, line] = listed.stdout.trimEnd().split('\n');
    assert.equal(header, 'name\towner\tagents');
    const [name, owner, agents] = line!.split('\t');
    assert.equal(name, 'alice.agent');
    assert.equal(owner, 'alice');
    assert.deepEqual(
      new Set(agents!.split(' ')),
      new Set([`${first.address}:1`, `${second.address}:3`]),
    );
  });

  it("refuses another user's name, invalid names and addresses, with exit code 2", () => {
    const stolen = runAgentry([
      'domains',
      'add',
      'alice.agent',
      first.address,
      '--user',
      'bob',
      ...db,
    ]);
    assert.equal(stolen.code, 2);
    assert.match(stolen.stderr, /belongs to another user/);
    const invalid = runAgentry(['domains', 'add', 'Alice', first.address, '--user', 'bob', ...db]);
    assert.equal(invalid.code, 2);
    assert.match(invalid.stderr, /not a valid name/);
    const address = runAgentry([
      'domains',
      'add',
      'bob.agent',
      'agent1nope',
      '--user',
      'bob',
      ...db,
    ]);
    assert.equal(address.code, 2);
    assert.match(address.stderr, /not an agent address/);
    const taken = runAgentry([
      'domains',
      'add',
      'bob.agent',
      first.address,
      '--user',
      'bob',
      ...db,
    ]);
    assert.equal(taken.code, 2);
    assert.match(taken.stderr, /already assigned to another domain/);
  });

  it('serves the name to uAgents, then removes it', async () => {
    const server = await Server.create(
      loadConfig({ databaseUrl: database.url, port: 0, host: '127.0.0.1', logLevel: 'silent' }, {}),
      { overrides: { logger: createLogger({ level: 'silent' }) } },
    );
    try {
      const url = await server.start();
      const domain = await call(url, 'GET', '/v1/almanac/domains/alice.agent?prefix=agent');
      assert.equal(domain.status, 200, domain.text);
      assert.equal(domain.body.name, 'alice.agent');
      assert.equal(domain.body.status, 'Registered');
      assert.equal(domain.body.expiry, null);
      assert.deepEqual(
        new Set(domain.body.assigned_agents.map((a: any) => `${a.address}:${a.weight}`)),
        new Set([`${first.address}:1`, `${second.address}:3`]),
      );
      await registerInAlmanac(url, first, { timestamp: unixSeconds(Date.now()) });
      const record = await call(url, 'GET', `/v1/almanac/agents/${first.address}`);
      assert.equal(record.body.domain_name, 'alice.agent');
    } finally {
      await server.close();
    }
    const removed = runAgentry(['domains', 'remove', 'alice.agent', ...db]);
    assert.equal(removed.code, 0, removed.stderr);
    const empty = runAgentry(['domains', 'list', ...db]);
    assert.equal(empty.stdout, '');
    assert.match(empty.stderr, /no names/);
    assert.equal(runAgentry(['domains', 'remove', 'alice.agent', ...db]).code, 2);
  });
});
