import { fileURLToPath } from 'node:url';
import { ChildRun } from '../../test/kit/process.js';
import { measureForDuration, type LoadProfile } from '../lib/load.js';
import type { Measure } from '../lib/report.js';

const echoServer = fileURLToPath(new URL('./echo-server.ts', import.meta.url));

/**
 * Requests per CPU-second of a bare node:http server echoing `body`, driven by the same
 * load generator, connections and duration as the scenarios. Dividing by the server's own
 * CPU time gives what one core serves even when the load generator is the bottleneck.
 */
export async function measureHttpCeiling(body: string, profile: LoadProfile): Promise<Measure> {
  const echo = ChildRun.node('echo server', ['--import', 'tsx', echoServer]);
  try {
    const [, port] = await echo.waitForOutput(/listening on (\d+)/);
    const run = await measureForDuration(
      {
        url: `http://127.0.0.1:${port}`,
        request: { method: 'POST', path: '/', body },
        expectStatus: 200,
        cpuOfPid: echo.pid,
      },
      profile,
    );
    return {
      id: 'ceiling.http',
      label: `HTTP ceiling: node:http echo of a ${body.length} B JSON body`,
      value: run.requestsPerSecond / run.serverCores!,
      unit: 'req/s/core',
      latencyMs: { p50: run.latencyMs.p50, p99: run.latencyMs.p99 },
      serverCores: run.serverCores,
      details: {
        requestsPerSecond: run.requestsPerSecond,
        loadGeneratorCores: run.loadGeneratorCores,
        requests: run.requests,
        connections: profile.connections,
      },
    };
  } finally {
    await echo.stop();
  }
}
