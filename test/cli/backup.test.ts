import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { registerAgent } from '../kit/agents.js';
import { runAgentry, runAgentryInBackground, spawnServer } from '../kit/process.js';
import { mailboxSignatures, SubmitLoad } from '../kit/submit-load.js';
import { TestIdentity } from '../kit/uagent.js';

describe('backup and restore of the embedded database', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentry-backup-'));
  const data = ['--data-dir', join(dir, 'data')];
  const backupFile = join(dir, 'agentry-backup.db');
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('backs up under write load, refuses to restore over a database in use, and restores every message committed before the backup began', async () => {
    let server = await spawnServer(data, { AGENTRY_DRAIN_SECONDS: '0' });
    const recipient = TestIdentity.random();
    let load: SubmitLoad | undefined;
    try {
      await registerAgent(server, server.bootstrapKey!, recipient);
      const url = server.url;
      load = new SubmitLoad({ target: () => url, recipient, submitters: 8, maxMs: 60_000 });
      await load.acknowledgedAtLeast(200);

      const committedBefore = load.acknowledged.map(({ signature }) => signature);
      const backup = await runAgentryInBackground(['backup', backupFile, ...data]);
      const backupEnded = load.acknowledged.length;
      assert.equal(backup.code, 0, backup.output);
      assert.match(backup.output, /backed up .* to .*agentry-backup\.db \(\d+ bytes\)/);
      assert.ok(
        backupEnded > committedBefore.length,
        'the server went on committing while the backup ran',
      );
      // Messages after the backup: the restore must take them away again.
      await load.acknowledgedAtLeast(backupEnded + 50);

      const refused = await runAgentryInBackground(['restore', backupFile, ...data]);
      assert.equal(refused.code, 2, refused.output);
      assert.match(refused.output, /in use/);
      await load.stop();
      load = undefined;
      const live = await mailboxSignatures(server.url, recipient);
      assert.ok(
        committedBefore.every((signature) => live.has(signature)),
        'a refused restore leaves the database as it was',
      );

      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0);
      const restored = runAgentry(['restore', backupFile, ...data]);
      assert.equal(restored.code, 0, restored.stderr);
      assert.match(restored.stdout, /kept as .*before-restore/);

      server = await spawnServer(data);
      const stored = await mailboxSignatures(server.url, recipient);
      const lost = committedBefore.filter((signature) => !stored.has(signature));
      assert.deepEqual(lost, [], `${lost.length} of ${committedBefore.length} lost`);
      assert.ok(stored.size < live.size, 'the restored database is the backup, not the live one');
    } finally {
      await load?.stop();
      await server.child.stop();
    }
  });

  it('refuses a file that is not an Agentry database, and leaves the database alone', () => {
    const bogus = join(dir, 'not-a-database.db');
    writeFileSync(bogus, 'hello');
    const res = runAgentry(['restore', bogus, ...data]);
    assert.equal(res.code, 2);
    assert.match(res.stderr, /not a usable database|cannot be opened/);
    assert.ok(existsSync(join(dir, 'data', 'agentry.db')));
  });

  it('points to pg_dump for PostgreSQL', () => {
    const res = runAgentry(['backup', backupFile, '--database-url', 'postgres://u@127.0.0.1/x']);
    assert.equal(res.code, 2);
    assert.match(res.stderr, /pg_dump/);
  });
});
