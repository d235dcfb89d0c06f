import { existsSync, mkdtempSync, chmodSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaults, type Config } from '../../src/config/index.js';
import { createHostingRunner } from '../../src/context.js';
import type { HostingRunner, HostingRunnerOptions } from '../../src/runner/runner.js';
import type { HostedState } from '../../src/services/hosting/index.js';
import { call } from './http.js';
import type { TestServer } from './server.js';

/**
 * Hosted agents in tests: small Python programs deployed to a running test server as a user
 * deploys them, and a runner that runs them.
 */

/** The interpreter the tests run agents with: Debian's, readable by every user. */
export const TEST_PYTHON = '/usr/bin/python3';

/** Why hosted-agent tests cannot run here, or undefined when they can. */
export function hostingSkipReason(sandbox: 'off' | 'bwrap'): string | undefined {
  if (!existsSync(TEST_PYTHON))
    return `${TEST_PYTHON} is missing (Debian: apt-get install python3)`;
  if (sandbox === 'bwrap' && !['/usr/bin/bwrap', '/bin/bwrap'].some((p) => existsSync(p))) {
    return 'bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)';
  }
  return undefined;
}

/**
 * A directory for agents' private directories that other users may search: the agents of a
 * root runner run as users of their own, and the scratch directories of tests are private.
 */
export function hostingDir(): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'agentry-hosted-'));
  chmodSync(dir, 0o755);
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Hosting settings for a test server whose agents a test's own runner runs. */
export function hostingConfig(changes: Partial<Config['hosting']>): Config['hosting'] {
  return {
    ...defaults.hosting,
    python: TEST_PYTHON,
    runner: 'separate',
    ...changes,
  };
}

/** Timings that keep tests short: quick rounds, restarts and checks. */
export const FAST_RUNNER: Partial<HostingRunnerOptions> = {
  tickMs: 200,
  leaseMs: 5_000,
  stopGraceMs: 2_000,
  restartBaseMs: 200,
  restartMaxMs: 2_000,
  monitorMs: 250,
  diskCheckMs: 250,
};

/** Starts a runner in the test's process over the server's services. */
export async function startRunner(
  server: TestServer,
  options: Partial<HostingRunnerOptions> = {},
): Promise<HostingRunner> {
  const runner = createHostingRunner(server.server.ctx, { ...FAST_RUNNER, ...options });
  await runner.start();
  return runner;
}

export interface LogLine {
  log_timestamp: string;
  log_entry: string;
  log_type: 'execution' | 'system';
  log_level: 'trce' | 'debg' | 'info' | 'warn' | 'erro';
}

export interface AgentView {
  address: string;
  state: HostedState;
  stateReason: string | null;
  restarts: number;
}

/** The owner's side of hosted agents: the Hosting API, called with the owner's key. */
export class Owner {
  constructor(
    private readonly server: TestServer,
    private readonly key = server.userKey,
  ) {}

  private async call<T = any>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await call<T>(this.server.url, method, `/v1/hosting${path}`, {
      key: this.key,
      body,
    });
    if (response.status >= 300) {
      throw new Error(`${method} /v1/hosting${path} answered ${response.status}: ${response.text}`);
    }
    return response.body;
  }

  /**
   * Creates an agent with these files (agent.py among them), its secrets, and starts it; on
   * the network given, or the service's default.
   */
  async deploy(
    name: string,
    files: Record<string, string>,
    secrets: Record<string, string> = {},
    network?: 'mainnet' | 'testnet',
  ): Promise<string> {
    const { address } = await this.call<{ address: string }>('POST', '/agents', {
      name,
      ...(network === undefined ? {} : { network }),
    });
    await this.setCode(address, files);
    for (const [secret, value] of Object.entries(secrets)) {
      await this.call('POST', '/secrets', { address, name: secret, secret: value });
    }
    await this.start(address);
    return address;
  }

  async setCode(address: string, files: Record<string, string>): Promise<void> {
    const code = Object.entries(files).map(([fileName, value]) => ({
      name: fileName,
      value,
      language: fileName.endsWith('.py') ? 'python' : 'plaintext',
    }));
    await this.call('PUT', `/agents/${address}/code`, { code: JSON.stringify(code) });
  }

  async start(address: string): Promise<void> {
    await this.call('POST', `/agents/${address}/start`);
  }

  async stop(address: string): Promise<void> {
    await this.call('POST', `/agents/${address}/stop`);
  }

  async setNetwork(address: string, network: 'mainnet' | 'testnet'): Promise<void> {
    await this.call('PUT', `/agents/${address}/network`, { network });
  }

  async agent(address: string): Promise<AgentView> {
    const agent = await this.call<{
      state: HostedState;
      state_reason: string | null;
      restarts: number;
    }>('GET', `/agents/${address}`);
    return {
      address,
      state: agent.state,
      stateReason: agent.state_reason,
      restarts: agent.restarts,
    };
  }

  async logs(address: string): Promise<LogLine[]> {
    return this.call<LogLine[]>('GET', `/agents/${address}/logs/latest`);
  }

  /** A value of the agent's storage; undefined when the key is not there. */
  async storage(address: string, key: string): Promise<string | undefined> {
    const response = await call<{ value: string }>(
      this.server.url,
      'GET',
      `/v1/hosting/agents/${address}/storage/${encodeURIComponent(key)}`,
      { key: this.key },
    );
    if (response.status === 404) return undefined;
    return response.body.value;
  }

  /** Waits for the agent's view to satisfy `test`; the last view seen otherwise, in the error. */
  async waitForAgent(
    address: string,
    test: (agent: AgentView) => boolean,
    timeoutMs = 15_000,
  ): Promise<AgentView> {
    let last: AgentView | undefined;
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      last = await this.agent(address);
      if (test(last)) return last;
      await sleep(100);
    }
    const logs = (await this.logs(address)).slice(-15).map((line) => `  ${line.log_entry}`);
    throw new Error(
      `hosted agent never got there; last seen ${JSON.stringify(last)}; its last log lines:\n${logs.join('\n')}`,
    );
  }

  /** Waits for a log line matching `pattern`; answers it. */
  async waitForLog(address: string, pattern: RegExp, timeoutMs = 15_000): Promise<LogLine> {
    const until = Date.now() + timeoutMs;
    let lines: LogLine[] = [];
    while (Date.now() < until) {
      lines = await this.logs(address);
      const line = lines.find((l) => pattern.test(l.log_entry));
      if (line) return line;
      await sleep(100);
    }
    const tail = lines.slice(-15).map((line) => `  ${line.log_entry}`);
    throw new Error(`no log line matched ${pattern}; the last ones:\n${tail.join('\n')}`);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Whether a process of this machine is alive. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
