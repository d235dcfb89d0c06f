import { it } from 'node:test';
import assert from 'node:assert/strict';
import { Store } from '../../src/store/index.js';
import { registerAgent } from '../kit/agents.js';
import { createTestDatabase } from '../kit/databases.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { spawnServer } from '../kit/process.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

const SUBMITTERS = 8;
const KILL_AFTER_ACKNOWLEDGED = 150;

describeOnEachDialect('mailbox durability', (dialect) => {
  it('keeps every acknowledged message when the server is killed mid-traffic', async () => {
    const database = await createTestDatabase(dialect);
    let first = await spawnServer(['--database-url', database.url]);
    const store = Store.open(database.url);
    try {
      const key = first.bootstrapKey;
      assert.ok(key, 'a fresh store prints a key');
      const recipient = TestIdentity.random();
      await registerAgent({ url: first.url }, key, recipient);

      // Senders submit until the connection breaks; a 200 is a promise of durability.
      const acknowledged: string[] = [];
      let killed = false;
      const submitter = async (index: number) => {
        const sender = TestIdentity.random();
        for (let n = 0; !killed; n++) {
          const envelope = sender.signEnvelope(
            makeEnvelope({
              sender: sender.address,
              target: recipient.address,
              payloadJson: `{"submitter":${index},"n":${n}}`,
              nonce: n,
            }),
          );
          try {
            const res = await call(first.url, 'POST', '/v2/agents/mailbox/submit', {
              body: envelope,
            });
            if (res.status === 200) acknowledged.push(envelope.signature!);
          } catch {
            return; // the server is gone
          }
          if (acknowledged.length >= KILL_AFTER_ACKNOWLEDGED && !killed) {
            killed = true;
            first.child.kill('SIGKILL');
          }
        }
      };
      const deadline = setTimeout(() => {
        killed = true;
        first.child.kill('SIGKILL');
      }, 10_000);
      await Promise.all(Array.from({ length: SUBMITTERS }, (_, i) => submitter(i)));
      clearTimeout(deadline);
      await first.exited;
      assert.ok(acknowledged.length >= KILL_AFTER_ACKNOWLEDGED, 'traffic flowed before the kill');

      first = await spawnServer(['--database-url', database.url]);
      const now = Math.floor(Date.now() / 1000);
      const authorization = `Agent ${recipient.attestation({ validFrom: now, validTo: now + 1000 })}`;
      const listed = new Set<string>();
      for (let offset = 0; ; offset += 1000) {
        const page = await call(
          first.url,
          'GET',
          `/v2/agents/${recipient.address}/mailbox?limit=1000&offset=${offset}`,
          { authorization },
        );
        assert.equal(page.status, 200, page.text);
        for (const item of page.body) listed.add(item.envelope.signature);
        if (page.body.length < 1000) break;
      }
      const lost = acknowledged.filter((signature) => !listed.has(signature));
      assert.deepEqual(lost, [], `${lost.length} of ${acknowledged.length} acknowledged lost`);
      const mailbox = await store.repos.mailbox.find(recipient.address);
      assert.equal(mailbox?.pending_messages, listed.size, 'counters agree with the messages');
    } finally {
      first.child.kill('SIGKILL');
      await first.exited;
      await store.close();
      await database.drop();
    }
  });
});
