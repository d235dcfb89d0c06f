import { randomUUID } from 'node:crypto';
import { chmod, mkdir, rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { NotFoundError } from '../errors.js';
import type { ChangeConsumer, ChangeFeed } from '../infra/change-feed.js';
import type { Logger } from '../logger.js';
import { makeRuntimeDirectory, prepareAgentPaths, stageBootstrap } from './directories.js';
import { HostedProcess, reported } from './hosted-process.js';
import { readProcessTable } from './processes.js';
import { Sandbox } from './sandbox.js';
import {
  DEFAULTS,
  type HostingRunnerOptions,
  type RunnerHosting,
  type RunnerSettings,
} from './settings.js';

export type { HostingRunnerOptions, RunnerHosting } from './settings.js';

/**
 * The runner: runs the hosted agents this process holds, one supervised process each. Every
 * few seconds it tells the database it is alive, renews its hold on its agents and claims more
 * (up to its capacity); replicas agree on who runs what through those claims. Each agent's
 * process is started in its sandbox, its output is kept as its log, its storage requests are
 * answered, and it is restarted after a crash, with a growing wait, until it crashes too often.
 */

export class HostingRunner implements ChangeConsumer<'hosting.changed'> {
  /** An owner changed what should run: the runner looks at once. */
  readonly kinds = ['hosting.changed'] as const;
  readonly id = randomUUID();
  private readonly settings: RunnerSettings;
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
  private preparing: Promise<void> | undefined;

  constructor(
    private readonly hosting: RunnerHosting,
    options: HostingRunnerOptions,
    private readonly logger: Logger,
    /** Where owners' changes are heard (those of this process and, on PostgreSQL, the others). */
    private readonly changes?: ChangeFeed,
  ) {
    this.settings = { ...DEFAULTS, ...options };
  }

  /** Agents this runner runs now (any state), by address. */
  get running(): string[] {
    return [...this.agents.keys()];
  }

  /**
   * Looks at the machine (the interpreter, the sandbox) and checks that an agent's process can
   * start, running nothing yet; throws with a sentence when it cannot run agents here. A
   * server prepares its runner before it listens, so that it refuses to start at all.
   */
  prepare(): Promise<void> {
    this.preparing ??= this.lookAtTheMachine();
    return this.preparing;
  }

  private async lookAtTheMachine(): Promise<void> {
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
  }

  /** Prepares (see {@link prepare}), then runs agents. */
  async start(): Promise<void> {
    await this.prepare();
    const { settings } = this;
    this.logger.info(
      {
        runner: this.id,
        sandbox: settings.sandbox.mode,
        egress: settings.sandbox.egress,
        maxAgents: settings.maxAgents,
        cpu: this.sandbox!.cpuMeasure,
        processes: this.sandbox!.processMeasure,
      },
      'hosting runner started',
    );
    this.stopListening = this.changes?.attach(this);
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
  heard(): void {
    this.wake();
  }

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
      } else if (
        (want.codeDigest !== null && want.codeDigest !== agent.codeDigest) ||
        (agent.network !== null && want.network !== agent.network)
      ) {
        agent.restartWithChanges();
      }
    }
    if (this.stopped) return;
    const claimed = await this.hosting.claim(this.id, settings.maxAgents, settings.leaseMs);
    for (const address of claimed) {
      const known = this.agents.get(address);
      if (known === undefined) {
        if (!this.leaving.has(address)) this.launch(address);
      } else if (known.failed) {
        // Let go and taken back within this round: its owner started it afresh after it
        // failed (which frees it for any runner) between the renewal above and this claim.
        // The process that gave up goes; the next round starts the agent anew. (One that
        // runs, taken back after this runner's lease ran out, runs on.)
        this.dismiss(known, undefined);
      }
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
