import { it } from 'node:test';
import assert from 'node:assert/strict';
import { registerAgent } from '../kit/agents.js';
import { createTestDatabase } from '../kit/databases.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { spawnServer } from '../kit/process.js';
import { mailboxSignatures, SubmitLoad, type SubmitOutcome } from '../kit/submit-load.js';
import { TestIdentity } from '../kit/uagent.js';

const DRAIN_SECONDS = 2;

/** How many outcomes of each kind (status codes for answers), for failure messages. */
function tally(outcomes: SubmitOutcome[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const outcome of outcomes) {
    const kind = outcome.kind === 'answered' ? String(outcome.status) : outcome.kind;
    counts[kind] = (counts[kind] ?? 0) + 1;
  }
  return counts;
}

describeOnEachDialect('graceful drain', (dialect) => {
  it('behind a balancer, SIGTERM under load loses nothing, drops no request, and the other replica takes the load', async () => {
    const database = await createTestDatabase(dialect);
    // Two servers on one SQLite file, as during a handover on one machine, must be allowed.
    const env = { AGENTRY_DRAIN_SECONDS: String(DRAIN_SECONDS), AGENTRY_SQLITE_EXCLUSIVE: 'false' };
    const a = await spawnServer(['--database-url', database.url], env);
    const b = await spawnServer(['--database-url', database.url], env);
    let checking = true;
    try {
      const key = a.bootstrapKey;
      assert.ok(key, 'a fresh store prints a key');
      const recipient = TestIdentity.random();
      await registerAgent(a, key, recipient);

      // A balancer in miniature: it checks A's readiness every 100 ms and sends traffic to B
      // after two failed checks.
      let active = a.url;
      let notReadyAt: number | undefined;
      const balancer = (async () => {
        let failures = 0;
        while (checking && active === a.url) {
          const ready = await call(a.url, 'GET', '/ready').catch(() => undefined);
          if (ready?.status === 200) failures = 0;
          else {
            notReadyAt ??= Date.now();
            if (++failures >= 2) active = b.url;
          }
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      })();
      const load = new SubmitLoad({
        target: () => active,
        recipient,
        submitters: 8,
        maxMs: 60_000,
      });
      await load.acknowledgedAtLeast(100);

      const signalled = Date.now();
      a.child.kill('SIGTERM');
      // The signal reaches the process a moment later; from then on it is not ready.
      let ready = await call(a.url, 'GET', '/ready');
      while (ready.status === 200 && Date.now() - signalled < 1000) {
        ready = await call(a.url, 'GET', '/ready');
      }
      assert.equal(ready.status, 503, 'not ready within a second of the signal');
      assert.deepEqual(ready.body, { detail: 'Shutting down' });
      assert.equal((await call(a.url, 'GET', '/health')).status, 200, 'alive while draining');
      assert.equal(await a.exited, 0, a.child.output());
      const exited = Date.now();
      assert.doesNotMatch(a.child.output(), /request failed/, 'a drain logs no failures');
      await balancer;
      assert.ok(notReadyAt! - signalled < 1000, 'the balancer saw it within a check or two');
      assert.ok(exited - signalled >= DRAIN_SECONDS * 1000, 'served through the grace period');
      const beforeExit = load.acknowledged.length;
      await load.acknowledgedAtLeast(beforeExit + 50);
      await load.stop();

      const counts = JSON.stringify(tally(load.outcomes));
      assert.ok(
        load.outcomes.every((outcome) => outcome.kind === 'answered' && outcome.status === 200),
        `every submit was answered 200: ${counts}`,
      );
      const onA = load.acknowledged.filter(({ at }) => at > signalled && at < notReadyAt! + 200);
      assert.ok(onA.length > 0, 'submits went on being acknowledged after the signal');
      const stored = await mailboxSignatures(b.url, recipient);
      const lost = load.acknowledged.filter(({ signature }) => !stored.has(signature));
      assert.deepEqual(lost, [], `${lost.length} of ${load.acknowledged.length} acknowledged lost`);
    } finally {
      checking = false;
      a.child.kill('SIGKILL');
      await b.child.stop();
      await database.drop();
    }
  });

  it('without a grace period, finishes the commits in flight and answers them before it exits 0', async () => {
    const database = await createTestDatabase(dialect);
    const a = await spawnServer(['--database-url', database.url], { AGENTRY_DRAIN_SECONDS: '0' });
    try {
      const recipient = TestIdentity.random();
      await registerAgent(a, a.bootstrapKey!, recipient);
      const load = new SubmitLoad({
        target: () => a.url,
        recipient,
        submitters: 16,
        maxMs: 30_000,
      });
      await load.acknowledgedAtLeast(100);
      const signalled = Date.now();
      a.child.kill('SIGTERM');
      assert.equal(await a.exited, 0, a.child.output());
      await load.stop();

      // Clients that ignore readiness keep sending: once the server closes they are refused
      // (or, for a connection opened at that very moment, reset before it was read).
      const counts = JSON.stringify(tally(load.outcomes));
      const answered = load.outcomes.filter((outcome) => outcome.kind === 'answered');
      assert.ok(
        answered.every((outcome) => outcome.status === 200 || outcome.status === 503),
        `answers are 200, or 503 once closed: ${counts}`,
      );
      const afterSignal = load.acknowledged.filter(({ at }) => at >= signalled);
      assert.ok(afterSignal.length > 0, `submits in flight at the signal were answered: ${counts}`);

      const b = await spawnServer(['--database-url', database.url]);
      try {
        const stored = await mailboxSignatures(b.url, recipient);
        const lost = load.acknowledged.filter(({ signature }) => !stored.has(signature));
        assert.deepEqual(lost, [], `${lost.length} of ${load.acknowledged.length} lost`);
      } finally {
        await b.child.stop();
      }
    } finally {
      a.child.kill('SIGKILL');
      await database.drop();
    }
  });
});
