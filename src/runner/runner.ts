import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { sha256Hex } from '../crypto/index.js';
import { once } from 'node:events';
import {
  chmod,
  copyFile,
  lchown,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  rm,
  writeFile,
} from 'node:fs/promises';
import { createServer, connect, type Server as NetServer, type Socket } from 'node:net';
import { hostname, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { NotFoundError } from '../errors.js';
import type { Logger } from '../logger.js';
import {
  bootstrapPath,
  Sandbox,
  SANDBOX_BRIDGE_SOCKET,
  SANDBOX_PACKAGES,
  spawnPlan,
  type AgentPaths,
  type LaunchPlan,
  type SandboxSettings,
} from './sandbox.js';
import {
  CLOCK_TICKS,
  descendants,
  readProcessTable,
  signalAll,
  type ProcessTable,
} from './processes.js';
import {
  MAX_LOG_ENTRY,
  type HostedLogLevel,
  type HostedLogLine,
  type HostedRunSpec,
  type HostedState,
  type HostingService,
} from '../services/hosting.js';

/**
 * The runner: runs the hosted agents this process holds, one supervised process each. Every
 * few seconds it tells the database it is alive, renews its hold on its agents and claims more
 * (up to its capacity); replicas agree on who runs what through those claims. Each agent's
 * process is started in its sandbox, its output is kept as its log, its storage requests are
 * answered, and it is restarted after a crash, with a growing wait, until it crashes too often.
 */

/** What the runner asks of the hosting service. */
export type RunnerHosting = Pick<
  HostingService,
  | 'heartbeat'
  | 'claim'
  | 'renew'
  | 'release'
  | 'runSpec'
  | 'setState'
  | 'appendLogs'
  | 'storageGet'
  | 'storageSet'
  | 'storageDelete'
  | 'storageList'
  | 'storageClear'
> &
  Partial<Pick<HostingService, 'onChange'>>;

export interface HostingRunnerOptions {
  /** The URL agents register and are reached by. */
  publicUrl: string;
  /** Where each agent gets its private directory. */
  dir: string;
  maxAgents: number;
  allowRequirements: boolean;
  logLinesPerSecond: number;
  sandbox: SandboxSettings;
  /** How long a claim lasts unless renewed. */
  leaseMs?: number;
  /** How often the runner renews, claims and reconciles. */
  tickMs?: number;
  /** How long a stopped agent has between SIGTERM and SIGKILL. */
  stopGraceMs?: number;
  /** The first wait before a restart after a crash; it doubles at each crash, up to the most. */
  restartBaseMs?: number;
  restartMaxMs?: number;
  /** This many crashes within `crashLoopMs` end in state failed. */
  crashLoopCount?: number;
  crashLoopMs?: number;
  /** How often processes, CPU and disk are looked at. */
  monitorMs?: number;
  diskCheckMs?: number;
  /**
   * Whether agents are held in control groups where the runner may make them; without, CPU
   * is sampled and processes counted (or limited per user).
   */
  controlGroups?: boolean;
  /** An agent above its CPU share on average over this long is stopped (without a control group). */
  cpuWindowMs?: number;
}

const DEFAULTS = {
  leaseMs: 20_000,
  tickMs: 3_000,
  stopGraceMs: 5_000,
  restartBaseMs: 1_000,
  restartMaxMs: 60_000,
  crashLoopCount: 5,
  crashLoopMs: 120_000,
  monitorMs: 1_000,
  diskCheckMs: 2_000,
  cpuWindowMs: 30_000,
  controlGroups: true,
};

type Settings = Required<HostingRunnerOptions>;

/** The port an agent's own server listens on inside a sandbox with a network of its own. */
const SANDBOXED_AGENT_PORT = 8000;
/** The port inside such a sandbox that leads to Agentry. */
const SANDBOXED_BRIDGE_PORT = 8001;
/** Lines longer than this (without a newline) are cut. */
const MAX_LINE = MAX_LOG_ENTRY;
/** A storage request longer than this is refused (the store's own bounds are smaller). */
const MAX_CHANNEL_LINE = 4 * 1024 * 1024;
/** Keys answered for `keys` at most. */
const MAX_KEYS_LISTED = 10_000;
/** Connections one agent may have open to Agentry through its bridge. */
const MAX_BRIDGE_CONNECTIONS = 64;
/** Entries of a private directory looked at, at most, when measuring it. */
const MAX_DISK_ENTRIES = 100_000;
/** Lines that say a process ran out of memory (under RLIMIT_AS, an allocation fails). */
const OUT_OF_MEMORY = /\bMemoryError\b|Cannot allocate memory|std::bad_alloc|out of memory/i;
/** A process that ran this long before crashing starts the count of crashes afresh. */
const STABLE_MS = 60_000;

export class HostingRunner {
  readonly id = randomUUID();
  private readonly settings: Settings;
  private sandbox: Sandbox | undefined;
  private readonly agents = new Map<string, HostedProcess>();
  /** Agents being stopped: their slots stay taken until their processes have ended. */
  private readonly leaving = new Map<string, { slot: number; done: Promise<void> }>();
  private timer: NodeJS.Timeout | undefined;
  private monitorTimer: NodeJS.Timeout | undefined;
  private diskTimer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private stopped = false;
  /** The runner's own directory: the bridges' sockets and the bootstrap (see {@link makeRuntimeDirectory}). */
  private runtime: string | undefined;
  /** A change asked for during a round: the next round follows at once. */
  private wakeAgain = false;
  private stopListening: (() => void) | undefined;

  constructor(
    private readonly hosting: RunnerHosting,
    options: HostingRunnerOptions,
    private readonly logger: Logger,
  ) {
    this.settings = { ...DEFAULTS, ...options };
  }

  /** Agents this runner runs now (any state), by address. */
  get running(): string[] {
    return [...this.agents.keys()];
  }

  /**
   * Looks at the machine (the interpreter, the sandbox), checks that an agent's process can
   * start, then runs. Throws with a sentence when it cannot run agents here.
   */
  async start(): Promise<void> {
    const { settings } = this;
    await mkdir(settings.dir, { recursive: true, mode: 0o711 });
    await chmod(settings.dir, 0o711);
    this.runtime = await makeRuntimeDirectory();
    // Control groups are named by runner: several may share a machine (or, in tests, a process).
    this.sandbox = await Sandbox.prepare(settings.sandbox, `agentry-${this.id.slice(0, 8)}`, {
      controlGroups: settings.controlGroups,
      bootstrap: await stageBootstrap(this.runtime),
    });
    if (settings.sandbox.mode === 'bwrap') {
      const probe = await prepareAgentPaths(
        settings.dir,
        this.runtime,
        'probe',
        0,
        this.sandbox.uidOf(0),
      );
      try {
        await this.sandbox.check(probe);
      } catch (err) {
        await this.sandbox.close();
        throw err;
      } finally {
        await rm(dirname(probe.home), { recursive: true, force: true });
      }
    }
    this.logger.info(
      {
        runner: this.id,
        sandbox: settings.sandbox.mode,
        egress: settings.sandbox.egress,
        maxAgents: settings.maxAgents,
        cpu: this.sandbox.cpuMeasure,
        processes: this.sandbox.processMeasure,
      },
      'hosting runner started',
    );
    this.stopListening = this.hosting.onChange?.(() => this.wake());
    this.schedule(0);
    this.monitorTimer = setInterval(() => void this.monitor(), settings.monitorMs);
    this.monitorTimer.unref();
    this.diskTimer = setInterval(() => void this.checkDisks(), settings.diskCheckMs);
    this.diskTimer.unref();
  }

  /** Stops every agent (SIGTERM, then SIGKILL after the grace), says so and lets them go. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.stopListening?.();
    clearTimeout(this.timer);
    clearInterval(this.monitorTimer);
    clearInterval(this.diskTimer);
    await this.ticking;
    for (const agent of [...this.agents.values()]) {
      this.dismiss(agent, 'Its runner stopped; another runner takes it over when one is running');
    }
    await Promise.all([...this.leaving.values()].map((leaving) => leaving.done));
    await this.sandbox?.close();
    if (this.runtime) await rm(this.runtime, { recursive: true, force: true });
    this.logger.info({ runner: this.id }, 'hosting runner stopped');
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.ticking = this.tick()
        .catch((err: unknown) => this.logger.error({ err }, 'hosting runner: a round failed'))
        .finally(() => {
          this.ticking = undefined;
          const again = this.wakeAgain;
          this.wakeAgain = false;
          this.schedule(again ? 0 : this.settings.tickMs);
        });
    }, ms);
    // Not unref'd: a process that only runs agents (`agentry runner`) lives by this timer.
  }

  /** Runs a round now (or right after the one under way): an owner changed what should run. */
  private wake(): void {
    if (this.stopped) return;
    if (this.ticking) {
      this.wakeAgain = true;
      return;
    }
    clearTimeout(this.timer);
    this.schedule(0);
  }

  /** One round: heartbeat, renew, reconcile what is held with what runs, claim more. */
  private async tick(): Promise<void> {
    const { settings } = this;
    await this.hosting.heartbeat(this.id, hostname(), settings.maxAgents);
    const held = await this.hosting.renew(this.id, settings.leaseMs);
    const heldByAddress = new Map(held.map((agent) => [agent.address, agent]));
    for (const agent of [...this.agents.values()]) {
      // Deleted, started afresh by its owner, or taken by another runner after a lost lease.
      if (!heldByAddress.has(agent.address)) this.dismiss(agent, undefined);
    }
    for (const want of held) {
      if (this.leaving.has(want.address)) continue;
      const agent = this.agents.get(want.address);
      if (want.desired === 'stopped') {
        if (agent) this.dismiss(agent, 'Stopped by its owner');
        else {
          await this.hosting.setState(want.address, 'stopped', 'Stopped by its owner');
          await this.hosting.release(this.id, want.address);
        }
      } else if (!agent) {
        this.launch(want.address);
      } else if (want.codeDigest !== null && want.codeDigest !== agent.codeDigest) {
        agent.restartWithNewCode();
      }
    }
    if (this.stopped) return;
    const claimed = await this.hosting.claim(this.id, settings.maxAgents, settings.leaseMs);
    for (const address of claimed) {
      if (!this.agents.has(address) && !this.leaving.has(address)) this.launch(address);
    }
  }

  private launch(address: string): void {
    const slot = this.freeSlot();
    if (slot === undefined) return;
    const agent = new HostedProcess(address, slot, {
      hosting: this.hosting,
      settings: this.settings,
      sandbox: this.sandbox!,
      runtime: this.runtime!,
      logger: this.logger,
    });
    this.agents.set(address, agent);
    agent.begin();
  }

  /**
   * Stops the agent's process; with a reason, records it stopped and lets it go. Until its
   * process has ended, its slot (its user, its control groups) is not given to another.
   */
  private dismiss(agent: HostedProcess, reason: string | undefined): void {
    this.agents.delete(agent.address);
    const done = (async () => {
      await agent.stop();
      if (reason !== undefined) {
        await this.report(() => this.hosting.setState(agent.address, 'stopped', reason));
        await this.report(() => this.hosting.release(this.id, agent.address));
      } else {
        await this.forgetIfDeleted(agent.address);
      }
    })().finally(() => this.leaving.delete(agent.address));
    this.leaving.set(agent.address, { slot: agent.slot, done });
  }

  /** An agent no longer held may have been deleted: then its private directory goes too. */
  private async forgetIfDeleted(address: string): Promise<void> {
    try {
      await this.hosting.runSpec(address);
    } catch (err) {
      if (err instanceof NotFoundError) {
        await rm(join(this.settings.dir, address), { recursive: true, force: true });
      }
    }
  }

  private freeSlot(): number | undefined {
    const used = new Set(
      [...this.agents.values(), ...this.leaving.values()].map((agent) => agent.slot),
    );
    for (let slot = 1; slot <= this.settings.maxAgents; slot++) if (!used.has(slot)) return slot;
    return undefined;
  }

  private report(call: () => Promise<unknown>): Promise<void> {
    return reported(this.logger, call);
  }

  /** Looks at every agent's processes: too many, or above the CPU share for too long. */
  private async monitor(): Promise<void> {
    if (this.agents.size === 0 || this.sandbox === undefined) return;
    const table = await readProcessTable();
    const now = performance.now();
    for (const agent of this.agents.values()) agent.observe(table, now);
  }

  private async checkDisks(): Promise<void> {
    for (const agent of this.agents.values()) await agent.checkDisk();
  }
}

/** One agent this runner holds: its process, restarts and the state it reports. */
class HostedProcess {
  codeDigest: string | null = null;
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
  private cpu: { at: number; ticks: number }[] = [];
  private checkingDisk = false;
  /** Counts starts; a start whose generation has passed is abandoned. */
  private generation = 0;
  private starting: Promise<void> | undefined;
  private reporting: Promise<void> = Promise.resolve();
  private stderrTail: string[] = [];

  private readonly hosting: RunnerHosting;
  private readonly settings: Settings;
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
  }

  begin(): void {
    const generation = ++this.generation;
    this.starting = this.start(generation).catch((err: unknown) =>
      this.startFailed(generation, err),
    );
  }

  /** New code: the process restarts at once, with its crash count afresh. */
  restartWithNewCode(): void {
    if (this.stopping) return;
    this.crashes = [];
    clearTimeout(this.restartTimer);
    // What is under way (a start, an install) is abandoned; its process is ended.
    this.generation += 1;
    void (async () => {
      await this.terminate();
      await this.starting;
      await this.terminate();
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

  /** Whether the start of this generation is still wanted. */
  private current(generation: number): boolean {
    return !this.stopping && generation === this.generation;
  }

  /** Records the agent's state; one write at a time, in the order the runner decided them. */
  private setState(state: HostedState, reason: string | null, restarts?: number): Promise<void> {
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
    this.cpu = [];
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
    this.logger.warn({ err, address: this.address }, 'hosted agent could not start');
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
    if (signal === 'SIGXFSZ') return 'disk limit (a file grew beyond it)';
    if (this.stderrTail.some((line) => OUT_OF_MEMORY.test(line))) return 'memory limit';
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
    const tree = descendants(pid, table);
    let tasks = 0;
    let ticks = 0;
    for (const p of tree) {
      const entry = table.get(p)!;
      tasks += entry.threads;
      ticks += entry.ticks;
    }
    const { processes, cpuPercent } = this.settings.sandbox.limits;
    if (tasks >= processes) {
      void this.limit(`too many processes (the limit is ${processes})`);
      return;
    }
    if (this.sandbox.cpuMeasure !== 'sampling') return;
    this.cpu.push({ at: now, ticks });
    const windowMs = this.settings.cpuWindowMs;
    while (this.cpu.length > 1 && now - this.cpu[0]!.at > windowMs) this.cpu.shift();
    const first = this.cpu[0]!;
    if (now - this.startedAt >= windowMs && now - first.at >= windowMs * 0.9) {
      const usedMs = ((ticks - first.ticks) * 1000) / CLOCK_TICKS;
      const percent = (usedMs / (now - first.at)) * 100;
      if (percent > cpuPercent * 1.1) {
        void this.limit(
          `cpu limit (${Math.round(percent)}% of a core for ${Math.round(windowMs / 1000)} s; the share is ${cpuPercent}%)`,
        );
      }
    }
  }

  /** Measures the private directory; over the limit, the agent is stopped. */
  async checkDisk(): Promise<void> {
    if (this.child === undefined || this.paths === undefined || this.checkingDisk) return;
    this.checkingDisk = true;
    try {
      const limit = this.settings.sandbox.limits.diskMb * 1024 * 1024;
      const { bytes, entries } = await directorySize(this.paths.home, MAX_DISK_ENTRIES);
      if (entries >= MAX_DISK_ENTRIES) {
        await this.limit(`disk limit (more than ${MAX_DISK_ENTRIES} files)`);
      } else if (bytes > limit) {
        await this.limit(
          `disk limit (${(bytes / 1024 / 1024).toFixed(1)} MiB in its directory; the limit is ${this.settings.sandbox.limits.diskMb} MiB)`,
        );
      }
    } finally {
      this.checkingDisk = false;
    }
  }
}

/** What one agent's supervisor is given by its runner. */
interface Surroundings {
  hosting: RunnerHosting;
  settings: Settings;
  sandbox: Sandbox;
  /** The runner's own directory (bridge sockets, the bootstrap). */
  runtime: string;
  logger: Logger;
}

/** Runs a call to the hosting service whose failure is logged, not thrown. */
async function reported(logger: Logger, call: () => Promise<unknown>): Promise<void> {
  try {
    await call();
  } catch (err) {
    logger.warn({ err }, 'hosting runner: could not record');
  }
}

/**
 * Longest unix socket path, in bytes: `sun_path` holds 108 with its closing NUL, and Node
 * cuts a longer path silently (the socket would then be made somewhere else).
 */
const MAX_SOCKET_PATH = 107;

/**
 * Makes this runner's own directory, for its bridge sockets and its copy of the bootstrap: a
 * new one with an unguessable name under the system's temporary directory (an agent's own
 * directory, under the hosting directory, may be too deep for a socket's path), that others
 * may pass through but not list.
 */
async function makeRuntimeDirectory(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'agentry-runtime-'));
  await chmod(dir, 0o711);
  // Slots are small numbers; ten digits is more than any runner has.
  const longest = join(dir, `${'9'.repeat(10)}.sock`);
  if (Buffer.byteLength(longest) > MAX_SOCKET_PATH) {
    await rm(dir, { recursive: true, force: true });
    throw new Error(
      `the temporary directory's path is too long for the agents' sockets (${longest} is over ${MAX_SOCKET_PATH} bytes): point TMPDIR at a shorter one`,
    );
  }
  return dir;
}

/**
 * Copies the bootstrap into the runner's directory, readable by all: the agents' own users
 * must read it, and where Agentry is installed (a home directory, a private checkout) may not
 * be open to them.
 */
async function stageBootstrap(runtime: string): Promise<string> {
  const path = join(runtime, 'bootstrap.py');
  await copyFile(bootstrapPath(), path);
  await chmod(path, 0o644);
  return path;
}

/**
 * Makes an agent's directories under `dir`: its home (owned by its user, when it has one of its
 * own) and its package directory, in a directory of its own; its bridge's socket is named by
 * its slot in the runner's own directory.
 */
async function prepareAgentPaths(
  dir: string,
  runtime: string,
  address: string,
  slot: number,
  uid: number | undefined,
): Promise<AgentPaths> {
  if (!/^[a-z0-9]+$/.test(address)) throw new Error(`not an agent address: ${address}`);
  const base = join(dir, address);
  await mkdir(base, { recursive: true, mode: 0o711 });
  await chmod(base, 0o711);
  const paths: AgentPaths = {
    home: join(base, 'home'),
    packages: join(base, 'packages'),
    bridgeSocket: join(runtime, `${slot}.sock`),
  };
  for (const path of [paths.home, paths.packages]) {
    await mkdir(path, { recursive: true, mode: 0o700 });
  }
  await chmod(paths.home, 0o700);
  await chmod(paths.packages, 0o755);
  if (uid !== undefined) {
    await chownTree(paths.home, uid);
    await chownTree(paths.packages, uid);
  }
  return paths;
}

function formatWait(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** A loopback port free now (for an agent's server where agents share the network). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * The unix socket through which an agent without a network reaches Agentry: each connection
 * is joined to a new connection to the public URL's host and port.
 */
async function openBridge(
  path: string,
  publicUrl: string,
  uid: number | undefined,
): Promise<NetServer> {
  const url = new URL(publicUrl);
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  const host = url.hostname.replace(/^\[|\]$/g, '');
  await rm(path, { force: true });
  const server = createServer((client) => {
    const upstream = connect({ host, port });
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.maxConnections = MAX_BRIDGE_CONNECTIONS;
  server.listen(path);
  await once(server, 'listening');
  await chmod(path, 0o600);
  if (uid !== undefined) await lchown(path, uid, uid);
  return server;
}

/**
 * Writes the agent's code into its private directory. Names are checked by the hosting
 * service; here no path may pass through a link the agent left (the runner may be root).
 */
async function writeCodeFiles(
  home: string,
  spec: HostedRunSpec,
  uid: number | undefined,
): Promise<void> {
  for (const file of spec.files) {
    const segments = file.name.split('/');
    if (segments.some((s) => s === '' || s === '.' || s === '..')) {
      throw new Error(`a code file's name is not allowed: ${file.name}`);
    }
    let dir = home;
    for (const segment of segments.slice(0, -1)) {
      dir = join(dir, segment);
      const stat = await lstat(dir).catch(() => undefined);
      if (stat === undefined) await mkdir(dir, { mode: 0o700 });
      else if (!stat.isDirectory())
        await rm(dir, { recursive: true, force: true }).then(() => mkdir(dir, { mode: 0o700 }));
      if (uid !== undefined) await lchown(dir, uid, uid);
    }
    const path = join(home, file.name);
    await rm(path, { recursive: true, force: true });
    await writeFile(path, file.value, { flag: 'wx', mode: 0o600 });
    if (uid !== undefined) await lchown(path, uid, uid);
  }
}

/** Gives a directory and everything in it to a user, following no link. */
async function chownTree(dir: string, uid: number): Promise<void> {
  await lchown(dir, uid, uid);
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await chownTree(path, uid);
    else await lchown(path, uid, uid).catch(() => {});
  }
}

/** Bytes used under a directory (each file's size or its blocks, whichever is more). */
async function directorySize(
  dir: string,
  maxEntries: number,
): Promise<{ bytes: number; entries: number }> {
  let bytes = 0;
  let entries = 0;
  const pending = [dir];
  while (pending.length > 0 && entries < maxEntries) {
    const current = pending.pop()!;
    const names = await readdir(current).catch(() => [] as string[]);
    for (const name of names) {
      entries += 1;
      if (entries >= maxEntries) break;
      const path = join(current, name);
      const stat = await lstat(path).catch(() => undefined);
      if (stat === undefined) continue;
      bytes += Math.max(stat.size, stat.blocks * 512);
      if (stat.isDirectory()) pending.push(path);
    }
  }
  return { bytes, entries };
}

// ---- Logs --------------------------------------------------------------------------------

/**
 * An agent's output as log lines: timestamped, cut to the longest kept, at most `perSecond`
 * a second. Past that, the rest of what was read is dropped and reading pauses until the
 * second is over, so that the agent waits on its own output; a line then says how many were
 * dropped. Lines are written in batches, one write at a time.
 */
class LogCapture {
  private pending: HostedLogLine[] = [];
  private writing: Promise<void> = Promise.resolve();
  private flushTimer: NodeJS.Timeout | undefined;
  private windowStart = 0;
  private inWindow = 0;
  private dropped = 0;
  private paused: Readable[] = [];
  private resumeTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly streams = new Set<Readable>();

  constructor(
    private readonly address: string,
    private readonly perSecond: number,
    private readonly hosting: RunnerHosting,
    private readonly logger: Logger,
  ) {}

  attach(stream: Readable, level: HostedLogLevel, seen: (line: string) => void): void {
    this.streams.add(stream);
    let partial = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      partial += chunk;
      let newline: number;
      while ((newline = partial.indexOf('\n')) !== -1) {
        const line = partial.slice(0, newline).replace(/\r$/, '');
        partial = partial.slice(newline + 1);
        seen(line);
        this.line(line, level, stream);
      }
      while (partial.length > MAX_LINE) {
        this.line(partial.slice(0, MAX_LINE), level, stream);
        partial = partial.slice(MAX_LINE);
      }
    });
    stream.on('end', () => {
      if (partial !== '') this.line(partial, level, stream);
      partial = '';
      this.streams.delete(stream);
    });
    stream.on('error', () => {});
  }

  /** A line of the runner's own about the agent; never dropped. */
  system(text: string, level: HostedLogLevel = 'info'): void {
    this.push({ time: new Date(), level, type: 'system', entry: text });
  }

  private line(text: string, level: HostedLogLevel, stream: Readable): void {
    const now = Date.now();
    if (now - this.windowStart >= 1000) this.newWindow(now);
    if (this.inWindow >= this.perSecond) {
      this.dropped += 1;
      if (!this.paused.includes(stream)) {
        stream.pause();
        this.paused.push(stream);
        clearTimeout(this.resumeTimer);
        this.resumeTimer = setTimeout(() => this.resume(), this.windowStart + 1000 - now);
      }
      return;
    }
    this.inWindow += 1;
    // The bootstrap's own lines are the runner's news, not the agent's.
    if (text.startsWith('[agentry] ')) {
      this.push({ time: new Date(now), level: 'info', type: 'system', entry: text.slice(10) });
    } else {
      this.push({ time: new Date(now), level, type: 'execution', entry: text.slice(0, MAX_LINE) });
    }
  }

  private newWindow(now: number): void {
    this.windowStart = now;
    this.inWindow = 0;
    this.reportDropped();
  }

  private reportDropped(): void {
    if (this.dropped === 0) return;
    const n = this.dropped;
    this.dropped = 0;
    this.system(
      `${n} line${n === 1 ? '' : 's'} dropped: more than ${this.perSecond} lines a second`,
      'erro',
    );
  }

  private resume(): void {
    this.newWindow(Date.now());
    const paused = this.paused;
    this.paused = [];
    for (const stream of paused) stream.resume();
  }

  private push(line: HostedLogLine): void {
    this.pending.push(line);
    if (this.pending.length >= 200) void this.flush();
    else if (this.flushTimer === undefined) {
      this.flushTimer = setTimeout(() => void this.flush(), 200);
      this.flushTimer.unref();
    }
  }

  flush(): Promise<void> {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const lines = this.pending;
    this.pending = [];
    if (lines.length > 0) {
      this.writing = this.writing.then(() =>
        this.hosting.appendLogs(this.address, lines).catch((err: unknown) => {
          this.logger.warn({ err, address: this.address }, 'hosted agent log lines not kept');
        }),
      );
    }
    return this.writing;
  }

  /** Once the process has ended: the last lines, and the count of dropped ones, are written. */
  async close(): Promise<void> {
    if (this.closed) return this.writing;
    this.closed = true;
    clearTimeout(this.resumeTimer);
    for (const stream of this.paused) stream.resume();
    this.paused = [];
    // What the pipes still hold arrives before they end.
    await Promise.all(
      [...this.streams].map((stream) =>
        stream.readableEnded ? undefined : Promise.race([once(stream, 'end'), delay(1000)]),
      ),
    );
    this.reportDropped();
    await this.flush();
  }
}

// ---- The storage channel (fd 3) ----------------------------------------------------------

type Notice = { op: string; reason?: unknown };

/** Answers the bootstrap's storage requests on fd 3, in order; hears its notices. */
class StorageChannel {
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly socket: Socket,
    private readonly address: string,
    private readonly hosting: RunnerHosting,
    private readonly notice: (notice: Notice) => void,
  ) {
    let partial = '';
    // The id of a request too long to read, whose rest is skipped up to its newline.
    let skipping: number | null | undefined;
    socket.setEncoding('utf8');
    socket.on('error', () => {});
    socket.on('data', (chunk: string) => {
      if (skipping !== undefined) {
        const end = chunk.indexOf('\n');
        if (end === -1) return;
        const id = skipping;
        skipping = undefined;
        chunk = chunk.slice(end + 1);
        this.queue = this.queue.then(() => this.refuse(id));
      }
      partial += chunk;
      let newline: number;
      while ((newline = partial.indexOf('\n')) !== -1) {
        const line = partial.slice(0, newline);
        partial = partial.slice(newline + 1);
        this.queue = this.queue.then(() => this.handle(line));
      }
      if (partial.length > MAX_CHANNEL_LINE) {
        // The bootstrap writes the id first: the answer can still name the request.
        const id = /^\{\s*"id"\s*:\s*(\d+)/.exec(partial)?.[1];
        skipping = id === undefined ? null : Number(id);
        partial = '';
      }
    });
  }

  private refuse(id: number | null): Promise<void> {
    this.write({ id, ok: false, error: `a storage request is at most ${MAX_CHANNEL_LINE} bytes` });
    return Promise.resolve();
  }

  private async handle(line: string): Promise<void> {
    let message: { id?: unknown; op?: unknown; key?: unknown; value?: unknown; reason?: unknown };
    try {
      message = JSON.parse(line) as typeof message;
    } catch {
      return;
    }
    if (typeof message !== 'object' || message === null) return;
    if (message.op === 'ready' || message.op === 'failed') {
      this.notice(message as Notice);
      return;
    }
    const id = message.id;
    try {
      const value = await this.answer(message);
      this.write({ id, ok: true, value });
    } catch (err) {
      this.write({ id, ok: false, error: err instanceof Error ? err.message : String(err) });
    }
  }

  private async answer(message: {
    op?: unknown;
    key?: unknown;
    value?: unknown;
  }): Promise<unknown> {
    const key = (): string => {
      if (typeof message.key !== 'string') throw new Error('a storage key is a string');
      return message.key;
    };
    switch (message.op) {
      case 'get': {
        const text = await this.hosting.storageGet(this.address, key());
        return text === undefined ? null : parseStored(text);
      }
      case 'has':
        return (await this.hosting.storageGet(this.address, key())) !== undefined;
      case 'set': {
        const text = JSON.stringify(message.value ?? null);
        await this.hosting.storageSet(this.address, key(), text);
        return null;
      }
      case 'delete':
        await this.hosting.storageDelete(this.address, key());
        return null;
      case 'clear':
        await this.hosting.storageClear(this.address);
        return null;
      case 'keys': {
        const keys: string[] = [];
        let after: string | undefined;
        do {
          const page = await this.hosting.storageList(this.address, after);
          keys.push(...page.items.map((item) => item.key));
          after = page.next ?? undefined;
        } while (after !== undefined && keys.length < MAX_KEYS_LISTED);
        return keys;
      }
      default:
        throw new Error(`unknown storage operation: ${String(message.op)}`);
    }
  }

  private write(message: unknown): void {
    if (!this.socket.destroyed) this.socket.write(`${JSON.stringify(message)}\n`);
  }
}

/** A stored value as the agent set it (JSON), or the text itself when it was set as text. */
function parseStored(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export type { HostedState };
