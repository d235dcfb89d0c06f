import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { HostingRunner } from '../../src/runner/runner.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import {
  hostingConfig,
  hostingDir,
  hostingSkipReason,
  sleep,
  startRunner,
} from '../kit/hosted-agents.js';
import { callTool, mcpClient, textOf } from '../kit/mcp.js';
import { startTestServer, type TestServer } from '../kit/server.js';

/**
 * Hosted agents through the MCP endpoint (docs/mcp.md), as an assistant deploys one: created
 * with its code, given a secret, started (with progress until it runs), its logs read, stopped;
 * run by a real runner over the server's database.
 */

const skip = hostingSkipReason('off');

const AGENT_PY = [
  'import os, time',
  'print("hello", os.environ["GREETING"], flush=True)',
  'while True:',
  '    time.sleep(0.2)',
].join('\n');

describe('hosted agents through MCP', { skip }, () => {
  describeOnEachDialect('the hosting tools', (dialect) => {
    let server: TestServer;
    let runner: HostingRunner;
    const hosted = hostingDir();

    before(async () => {
      server = await startTestServer({
        dialect,
        config: {
          hosting: hostingConfig({ key: 'cd'.repeat(32), dir: hosted.dir, sandbox: 'off' }),
        },
      });
      runner = await startRunner(server);
    });
    after(async () => {
      await runner?.stop();
      await server?.close();
      hosted.remove();
    });

    it('creates, configures, starts (telling how it goes), reads the logs of and stops an agent', async () => {
      const { client } = await mcpClient(server.url, server.userKey);
      try {
        const created = await callTool(client, 'create_hosted_agent', {
          name: 'greeter',
          code: AGENT_PY,
        });
        assert.equal(created.isError, undefined, textOf(created));
        const { address, state } = created.structuredContent as { address: string; state: string };
        assert.equal(state, 'stopped');

        const secret = await callTool(client, 'set_hosted_agent_secret', {
          address,
          name: 'GREETING',
          secret: 'from the assistant',
        });
        assert.equal(secret.isError, undefined, textOf(secret));
        assert.doesNotMatch(JSON.stringify(secret), /from the assistant/);

        const steps: string[] = [];
        const started = (await client.callTool(
          { name: 'start_hosted_agent', arguments: { address, wait_seconds: 30 } },
          undefined,
          { onprogress: (progress) => steps.push(progress.message ?? '') },
        )) as Awaited<ReturnType<typeof callTool>>;
        assert.equal(started.isError, undefined, textOf(started));
        assert.equal((started.structuredContent as { state: string }).state, 'running');
        assert.ok(steps.length >= 1, 'progress was told');
        assert.match(steps.at(-1)!, /running|compiling|stopped/);

        let logs = '';
        for (let i = 0; i < 100 && !/hello from the assistant/.test(logs); i++) {
          logs = textOf(await callTool(client, 'read_hosted_agent_logs', { address }));
          if (!/hello from the assistant/.test(logs)) await sleep(100);
        }
        assert.match(logs, /info hello from the assistant/);

        const stopped = await callTool(client, 'stop_hosted_agent', { address });
        assert.equal(stopped.isError, undefined, textOf(stopped));

        // Code that is not a list of files with agent.py is refused in words.
        const bad = await callTool(client, 'put_hosted_agent_code', {
          address,
          files: [{ name: 'helper.py', value: 'x = 1' }],
        });
        assert.equal(bad.isError, true);
        assert.match(textOf(bad), /agent\.py/);
      } finally {
        await client.close();
      }
    });
  });
});
