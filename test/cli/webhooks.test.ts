import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { Webhook, WebhookDelivery } from '../../src/wire/webhooks.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';
import { runAgentry, runAgentryInBackground } from '../kit/process.js';
import { startTestServer, type TestServer } from '../kit/server.js';

describeOnEachDialect('command line: webhooks', (dialect) => {
  let t: TestServer;
  const received: { headers: IncomingHttpHeaders; body: string }[] = [];
  /** What the receiver answers next; 200 once these are spent. */
  const answers: number[] = [];
  const receiver = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
      response.writeHead(answers.shift() ?? 200, { 'content-type': 'text/plain' }).end('noted');
    });
  });
  let receiverUrl: string;
  before(async () => {
    receiverUrl = await listenOnLoopback(receiver);
    t = await startTestServer({ dialect });
  });
  after(async () => {
    await t.close();
    await closeNow(receiver);
  });

  const db = () => ['--database-url', t.config.databaseUrl];
  const allowed = { AGENTRY_ALLOW_PRIVATE_TARGETS: 'true' };
  const jsonLines = <T>(stdout: string): T[] =>
    stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as T);

  it('adds, lists, tests, shows the deliveries of, redelivers and removes a webhook', async () => {
    const url = `${receiverUrl}/hook`;
    const refused = runAgentry(['webhooks', 'add', 'admin', url, '--kind', 'event.error', ...db()]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(
      refused.stderr,
      /^agentry: .*Deliveries to http:\/\/127\.0\.0\.1:\d+\/hook would be refused: .*AGENTRY_ALLOW_PRIVATE_TARGETS=true/,
    );
    assert.equal(refused.stdout, '');

    const added = runAgentry(
      ['webhooks', 'add', 'admin', url, '--kind', 'event.error', '--kind', 'agent.silent', ...db()],
      allowed,
    );
    assert.equal(added.code, 0, added.stderr);
    const [said, secret] = added.stdout.trim().split('\n');
    const id = /^webhook (wh_[a-z2-7]{16}) for admin: event\.error,agent\.silent to /.exec(
      said!,
    )?.[1];
    assert.ok(id, said);
    assert.match(secret!, /^whsec_/);

    const listed = runAgentry(['webhooks', 'list', 'admin', ...db()]);
    assert.equal(listed.code, 0, listed.stderr);
    const [header, row] = listed.stdout.trim().split('\n');
    assert.equal(header, 'id\turl\tkinds\tagents\tcreated\tdescription');
    assert.deepEqual(row!.split('\t').slice(0, 4), [id, url, 'event.error,agent.silent', 'all']);
    const [hook] = jsonLines<Webhook & { secret?: string }>(
      runAgentry(['webhooks', 'list', 'admin', '--json', ...db()]).stdout,
    );
    assert.equal(hook!.id, id);
    assert.equal(hook!.secret, undefined);
    // The server sees the hook the command made.
    const over = await fetch(`${t.url}/v2/webhooks/${id}`, {
      headers: { authorization: `Bearer ${t.userKey}` },
    });
    assert.equal(over.status, 200);

    answers.push(503);
    const tested = await runAgentryInBackground(
      ['webhooks', 'test', id, '--json', ...db()],
      allowed,
    );
    assert.equal(tested.code, 0, tested.output);
    const [first] = jsonLines<WebhookDelivery>(tested.stdout);
    assert.equal(first!.kind, 'webhook.test');
    assert.equal(first!.status, 'pending');
    assert.equal(first!.response!.status_code, 503);
    assert.equal(first!.response!.body, 'noted');
    assert.equal(first!.request!.body, received[0]!.body);

    const again = await runAgentryInBackground(
      ['webhooks', 'redeliver', id, first!.id, ...db()],
      allowed,
    );
    assert.equal(again.code, 0, again.output);
    const [deliveryHeader, line] = again.stdout.trim().split('\n');
    assert.equal(deliveryHeader, 'time\tid\tkind\tstatus\tattempts\tcode\tms\tagent\terror');
    const cells = line!.split('\t');
    assert.deepEqual(
      [cells[2], cells[3], cells[4], cells[5]],
      ['webhook.test', 'delivered', '1', '200'],
    );
    assert.equal(received.length, 2);
    assert.equal(received[1]!.headers['agentry-redelivery-of'], first!.id);

    const deliveries = runAgentry(['webhooks', 'deliveries', id, ...db()]);
    assert.equal(deliveries.code, 0, deliveries.stderr);
    assert.deepEqual(
      deliveries.stdout
        .trim()
        .split('\n')
        .slice(1)
        .map((l) => l.split('\t')[1]),
      [cells[1], first!.id],
    );
    const pending = jsonLines<WebhookDelivery>(
      runAgentry(['webhooks', 'deliveries', id, '--status', 'pending', '--json', ...db()]).stdout,
    );
    assert.deepEqual(
      pending.map((d) => [d.id, d.redelivery_of, d.response?.status_code]),
      [[first!.id, null, 503]],
    );

    const removed = runAgentry(['webhooks', 'remove', id, ...db()]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.equal(removed.stdout.trim(), `removed ${id}`);
    const none = runAgentry(['webhooks', 'list', 'admin', ...db()]);
    assert.equal(none.code, 0);
    assert.equal(none.stdout, '');
    assert.match(none.stderr, /no webhooks for admin/);
    const gone = runAgentry(['webhooks', 'test', id, ...db()]);
    assert.equal(gone.code, 2);
    assert.match(gone.stderr, /^agentry: Webhook not found/);
  });

  it('says in a sentence what is wrong with what it was given, and exits 2', () => {
    for (const [args, said] of [
      [
        ['add', 'admin', 'https://example.com/h', '--kind', 'agent.sad'],
        /agent\.sad is not a webhook kind/,
      ],
      [['add', 'admin', 'ftp://example.com/h', '--kind', 'event.error'], /http:\/\/ or https:\/\//],
      [['add', 'admin', 'https://example.com/h'], /give the kinds it is told of with --kind/],
      [['add', 'nobody', 'https://example.com/h', '--kind', 'event.error'], /nobody/],
      [
        ['redeliver', 'wh_aaaaaaaaaaaaaaaa', 'b5c5f0c2-0000-4000-8000-000000000000'],
        /Webhook not found/,
      ],
    ] as const) {
      const run = runAgentry(['webhooks', ...args, ...db()]);
      assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, said);
      assert.equal(run.stdout, '');
    }
  });
});
