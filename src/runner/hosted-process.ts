import type { ChildProcess } from 'node:child_process';
import { mkdir, lchown, readFile, rm, writeFile } from 'node:fs/promises';
import type { Server as NetServer, Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { sha256Hex } from '../crypto/index.js';
import type { Logger } from '../logger.js';
import type { AgentNetwork, HostedRunSpec, HostedState } from '../services/hosting/index.js';
import { freePort, openBridge } from './bridge.js';
import { prepareAgentPaths, writeCodeFiles } from './directories.js';
import { CpuSamples, diskProblem, limitInExit, processesProblem, treeUse } from './limits.js';
import { LogCapture } from './log-capture.js';
import { readProcessTable, signalAll, type ProcessTable } from './processes.js';
import {
  SANDBOX_BRIDGE_SOCKET,
  SANDBOX_PACKAGES,
  spawnPlan,
  type AgentPaths,
  type LaunchPlan,
  type Sandbox,
} from './sandbox.js';
import type { RunnerHosting, RunnerSettings } from './settings.js';
import { StorageChannel } from './storage-channel.js';

/** The port an agent's own server listens on inside a sandbox with a network of its own. */
const SANDBOXED_AGENT_PORT = 8000;
/** The port inside such a sandbox that leads to Agentry. */
const SANDBOXED_BRIDGE_PORT = 8001;
/** A process that ran this long before crashing starts the count of crashes afresh. */
const STABLE_MS = 60_000;

/** One agent this runner holds: its process, restarts and the state it reports. */
export class HostedProcess {
  /** The code and the network the process was started with. */
  codeDigest: string | null = null;
  network: AgentNetwork | null = null;
  private child: ChildProcess | undefined;
  private exited: Promise<void> | undefined;
  private plan: LaunchPlan | undefined;
  private paths: AgentPaths | undefined;
  private bridge: NetServer | undefined;
  private logs: LogCapture | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private crashes: number[] = [];
  private restarts = 0;
  private stopping = false;
  /** Why the runner killed the process (a limit), if it did. */
  private killReason: string | undefined;
  /** The bootstrap's account of code that did not load. */
  private loadFailure: string | undefined;
  private startedAt = 0;
  /** CPU time sampled since the process started (where no control group holds its share). */
  private cpu: CpuSamples;
  private checkingDisk = false;
  /** Counts starts; a start whose generation has passed is abandoned. */
  private generation = 0;
  private starting: Promise<void> | undefined;
  /** A restart for new code is waiting for the old process to end. */
  private restarting = false;
  private reporting: Promise<void> = Promise.resolve();
  private stderrTail: string[] = [];
  private gaveUp = false;

  private readonly hosting: RunnerHosting;
  private readonly settings: RunnerSettings;
  private readonly sandbox: Sandbox;
  private readonly runtime: string;
  private readonly logger: Logger;

  constructor(
    readonly address: string,
    readonly slot: number,
    surroundings: Surroundings,
  ) {
    this.hosting = surroundings.hosting;
    this.settings = surroundings.settings;
    this.sandbox = surroundings.sandbox;
    this.runtime = surroundings.runtime;
    this.logger = surroundings.logger;
    this.cpu = this.newCpuSamples();
  }

  /** Whether it gave up (a crash loop, code that does not load): it starts no more by itself. */
  get failed(): boolean {
    return this.gaveUp;
  }

  begin(): void {
    this.gaveUp = false;
    const generation = ++this.generation;
    this.starting = this.start(generation).catch((err: unknown) =>
      this.startFailed(generation, err),
    );
  }

  /** New code (or another network): the process restarts at once, with its crash count afresh. */
  restartWithChanges(): void {
    if (this.stopping) return;
    this.crashes = [];
    clearTimeout(this.restartTimer);
    // What is under way (a start, an install) is abandoned; its process is ended.
    this.generation += 1;
    // One restart at a time: one already waiting starts the newest code.
    if (this.restarting) return;
    this.restarting = true;
    void (async () => {
      try {
        await this.terminate();
        await this.starting;
        await this.terminate();
      } finally {
        this.restarting = false;
      }
      if (!this.stopping) this.begin();
    })();
  }

  /** Stops the process for good (this runner no longer runs the agent). */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    await this.terminate();
    await this.starting;
    // A start under way spawns nothing once stopping, but may have been spawning already.
    await this.terminate();
    await this.reporting;
  }

  private newCpuSamples(): CpuSamples {
    return new CpuSamples(this.settings.cpuWindowMs, this.settings.sandbox.limits.cpuPercent);
  }

  /** Whether the start of this generation is still wanted. */
  private current(generation: number): boolean {
    return !this.stopping && generation === this.generation;
  }

  /** Records the agent's state; one write at a time, in the order the runner decided them. */
  private setState(state: HostedState, reason: string | null, restarts?: number): Promise<void> {
    if (state === 'failed') this.gaveUp = true;
    this.reporting = this.reporting.then(() =>
      reported(this.logger, () => this.hosting.setState(this.address, state, reason, restarts)),
    );
    return this.reporting;
  }

  private async start(generation: number): Promise<void> {
    if (!this.current(generation)) return;
    const { sandbox } = this;
    const spec = await this.hosting.runSpec(this.address);
    this.codeDigest = spec.codeDigest;
    this.network = spec.network;
    const uid = sandbox.uidOf(this.slot);
    const paths = await prepareAgentPaths(
      this.settings.dir,
      this.runtime,
      this.address,
      this.slot,
      uid,
    );
    this.paths = paths;
    await writeCodeFiles(paths.home, spec, uid);
    this.logs = new LogCapture(
      this.address,
      this.settings.logLinesPerSecond,
      this.hosting,
      this.logger,
    );
    if (!(await this.installRequirements(generation, spec, paths, uid))) return;
    if (!this.current(generation)) return;

    const ownNetwork =
      this.settings.sandbox.mode === 'bwrap' && this.settings.sandbox.egress === 'agentry';
    const env: Record<string, string> = {
      ...spec.secrets,
      AGENTRY_AGENT_SEED: spec.seed,
      AGENTRY_AGENT_NAME: spec.name,
      AGENTRY_AGENT_NETWORK: spec.network,
      AGENTRY_URL: this.settings.publicUrl,
      AGENTRY_AGENT_PORT: String(ownNetwork ? SANDBOXED_AGENT_PORT : await freePort()),
    };
    if (ownNetwork) {
      env.AGENTRY_BRIDGE_PORT = String(SANDBOXED_BRIDGE_PORT);
      env.AGENTRY_BRIDGE_SOCKET = SANDBOX_BRIDGE_SOCKET;
      this.bridge = await openBridge(paths.bridgeSocket, this.settings.publicUrl, uid);
    }
    const plan = await sandbox.plan({ slot: this.slot, paths, env });
    if (!this.current(generation)) {
      this.bridge?.close();
      await plan.cgroup?.remove();
      return;
    }
    this.plan = plan;
    this.killReason = undefined;
    this.loadFailure = undefined;
    this.stderrTail = [];
    this.cpu = this.newCpuSamples();
    this.logs.system(sandbox.describe(this.settings.cpuWindowMs));
    const logs = this.logs;
    const child = spawnPlan(plan, 'pipe');
    this.child = child;
    this.startedAt = performance.now();
    this.exited = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        void this.onExit(generation, code, signal).finally(resolve);
      });
      child.once('error', (err) => {
        // A process that could not be spawned at all ends here, without an exit.
        if (child.pid !== undefined) return;
        this.killReason = `could not start: ${err.message}`;
        void this.onExit(generation, null, null).finally(resolve);
      });
    });
    logs.attach(child.stdout!, 'info', () => {});
    logs.attach(child.stderr!, 'erro', (line) => {
      this.stderrTail.push(line);
      if (this.stderrTail.length > 20) this.stderrTail.shift();
    });
    const channel = child.stdio[3] as Socket | null;
    if (channel) {
      new StorageChannel(channel, this.address, this.hosting, (notice) => this.onNotice(notice));
    }
    await this.setState('running', null, this.restarts);
  }

  /** Installs requirements.txt into the agent's package directory; false when it did not. */
  private async installRequirements(
    generation: number,
    spec: HostedRunSpec,
    paths: AgentPaths,
    uid: number | undefined,
  ): Promise<boolean> {
    const requirements = spec.files.find((file) => file.name === 'requirements.txt');
    if (requirements === undefined || requirements.value.trim() === '') return true;
    const logs = this.logs!;
    if (!this.settings.allowRequirements) {
      logs.system(
        'requirements.txt is not installed: this Agentry does not install requirements (AGENTRY_HOSTING_ALLOW_REQUIREMENTS)',
        'erro',
      );
      return true;
    }
    const digest = sha256Hex(requirements.value);
    const marker = join(dirname(paths.packages), 'requirements.sha256');
    if ((await readFile(marker, 'utf8').catch(() => '')) === digest) return true;
    await this.setState('compiling', 'Installing requirements.txt');
    await rm(marker, { force: true });
    await rm(paths.packages, { recursive: true, force: true });
    await mkdir(paths.packages, { mode: 0o755 });
    if (uid !== undefined) await lchown(paths.packages, uid, uid);
    const plan = await this.sandbox.plan({
      slot: this.slot,
      paths,
      env: {},
      network: true,
      writablePackages: true,
      pythonArgs: [
        '-m',
        'pip',
        'install',
        '--no-input',
        '--disable-pip-version-check',
        '--no-cache-dir',
        '--target',
        this.settings.sandbox.mode === 'bwrap' ? SANDBOX_PACKAGES : paths.packages,
        '-r',
        'requirements.txt',
      ],
    });
    if (!this.current(generation)) {
      await plan.cgroup?.remove();
      return false;
    }
    logs.system('installing requirements.txt');
    const child = spawnPlan(plan, 'ignore');
    this.child = child;
    this.plan = plan;
    const exit = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => {
      child.once('exit', (code, signal) => resolve([code, signal]));
      // A process that could not be spawned at all ends here, without an exit.
      child.once('error', () => {
        if (child.pid === undefined) resolve([null, null]);
      });
    });
    this.exited = exit.then(() => undefined);
    logs.attach(child.stdout!, 'info', () => {});
    logs.attach(child.stderr!, 'erro', () => {});
    const [code, signal] = await exit;
    this.child = undefined;
    await plan.cgroup?.remove();
    if (!this.current(generation)) return false;
    if (code !== 0) {
      await logs.close();
      await this.setState(
        'failed',
        `requirements.txt could not be installed (pip ${code !== null ? `exited with code ${code}` : signal !== null ? `killed by ${signal}` : 'did not start'}); see the logs`,
      );
      return false;
    }
    await writeFile(marker, digest);
    return true;
  }

  private onNotice(notice: { op: string; reason?: unknown }): void {
    if (notice.op === 'failed') {
      this.loadFailure = String(notice.reason ?? 'unknown error').slice(0, 1000);
    } else if (notice.op === 'ready') {
      this.logs?.system('code loaded; the agent is running');
    }
  }

  private async startFailed(generation: number, err: unknown): Promise<void> {
    this.bridge?.close();
    this.bridge = undefined;
    if (!this.current(generation)) return;
    // A crash loop of failed starts warns once, as its first; the rest are told as info.
    const level = this.crashes.length === 0 ? 'warn' : 'info';
    this.logger[level]({ err, address: this.address }, 'hosted agent could not start');
    await this.crashed(`could not start: ${err instanceof Error ? err.message : String(err)}`);
  }

  private async onExit(
    generation: number,
    code: number | null,
    signal: NodeJS.Signals | null,
  ): Promise<void> {
    this.child = undefined;
    this.bridge?.close();
    this.bridge = undefined;
    await this.plan?.cgroup?.remove();
    await this.logs?.close();
    if (!this.current(generation)) return;
    const ranMs = performance.now() - this.startedAt;
    if (this.loadFailure !== undefined) {
      await this.setState('failed', `code failed to load: ${this.loadFailure}`);
      return;
    }
    // An agent runs until it is stopped: one whose program ends, even well, is restarted.
    if (ranMs > STABLE_MS) this.crashes = [];
    await this.crashed(this.exitReason(code, signal));
  }

  private exitReason(code: number | null, signal: NodeJS.Signals | null): string {
    if (this.killReason !== undefined) return this.killReason;
    const limit = limitInExit(signal, this.stderrTail);
    if (limit !== undefined) return limit;
    if (signal !== null) return `killed by ${signal}`;
    if (code === 0)
      return 'exited with code 0 (its program ended; an agent is meant to run until stopped)';
    return `exited with code ${code}`;
  }

  /** Counts a crash: restarts after a growing wait, or fails when it crashes too often. */
  private async crashed(reason: string): Promise<void> {
    const { crashLoopCount, crashLoopMs, restartBaseMs, restartMaxMs } = this.settings;
    const now = performance.now();
    this.crashes = this.crashes.filter((at) => now - at < crashLoopMs);
    this.crashes.push(now);
    if (this.crashes.length >= crashLoopCount) {
      await this.setState(
        'failed',
        `crash loop: ${this.crashes.length} crashes within ${Math.round(crashLoopMs / 1000)} s, the last: ${reason}; start it again once fixed`,
      );
      return;
    }
    this.restarts += 1;
    const waitMs = Math.min(restartMaxMs, restartBaseMs * 2 ** (this.crashes.length - 1));
    await this.setState('crashed', `${reason}; restarting in ${formatWait(waitMs)}`, this.restarts);
    if (this.stopping) return;
    this.restartTimer = setTimeout(() => this.begin(), waitMs);
    this.restartTimer.unref();
  }

  /** Ends the process (SIGTERM to all of it, SIGKILL after the grace) and waits for it. */
  private async terminate(): Promise<void> {
    const child = this.child;
    if (child === undefined || child.pid === undefined) return;
    const table = await readProcessTable();
    const sandboxed = this.settings.sandbox.mode === 'bwrap';
    const grouped = (await this.plan?.cgroup?.pids()) ?? [];
    signalAll(child.pid, table, grouped, 'SIGTERM', sandboxed);
    const graceful = await Promise.race([
      this.exited?.then(() => true),
      delay(this.settings.stopGraceMs).then(() => false),
    ]);
    if (!graceful) await this.kill();
    await this.exited;
  }

  /** SIGKILL to every process of the agent. */
  private async kill(): Promise<void> {
    const pid = this.child?.pid;
    if (pid === undefined) return;
    const table = await readProcessTable();
    signalAll(pid, table, (await this.plan?.cgroup?.pids()) ?? [], 'SIGKILL');
  }

  /** Stops the process for a limit it went beyond; the reason is its state's. */
  private async limit(reason: string): Promise<void> {
    if (this.killReason !== undefined || this.child === undefined) return;
    this.killReason = reason;
    this.logs?.system(`stopped: ${reason}`, 'erro');
    await this.kill();
  }

  /** Looks at the process tree: too many processes, or too much CPU for too long. */
  observe(table: ProcessTable, now: number): void {
    const pid = this.child?.pid;
    if (pid === undefined || this.killReason !== undefined) return;
    const { tasks, ticks } = treeUse(pid, table);
    const tooMany = processesProblem(tasks, this.settings.sandbox.limits);
    if (tooMany !== undefined) {
      void this.limit(tooMany);
      return;
    }
    if (this.sandbox.cpuMeasure !== 'sampling') return;
    const overShare = this.cpu.add(now, ticks, this.startedAt);
    if (overShare !== undefined) void this.limit(overShare);
  }

  /** Measures the private directory; over the limit, the agent is stopped. */
  async checkDisk(): Promise<void> {
    if (this.child === undefined || this.paths === undefined || this.checkingDisk) return;
    this.checkingDisk = true;
    try {
      const problem = await diskProblem(this.paths.home, this.settings.sandbox.limits);
      if (problem !== undefined) await this.limit(problem);
    } finally {
      this.checkingDisk = false;
    }
  }
}

/** What one agent's supervisor is given by its runner. */
export interface Surroundings {
  hosting: RunnerHosting;
  settings: RunnerSettings;
  sandbox: Sandbox;
  /** The runner's own directory (bridge sockets, the bootstrap). */
  runtime: string;
  logger: Logger;
}

/** Runs a call to the hosting service whose failure is logged, not thrown. */
export async function reported(logger: Logger, call: () => Promise<unknown>): Promise<void> {
  try {
    await call();
  } catch (err) {
    logger.warn({ err }, 'hosting runner: could not record');
  }
}

function formatWait(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
