import { unseal } from '../../crypto/index.js';
import { NotFoundError } from '../../errors.js';
import { parseCode, storableEntry } from './checks.js';
import { notFound, sealContext, type HostingCore } from './core.js';
import type {
  AgentNetwork,
  DesiredState,
  HeldAgentState,
  HostedLogLine,
  HostedRunSpec,
  HostedState,
} from './model.js';

/** A runner not heard of for this long is forgotten. */
const RUNNER_FORGET_MS = 24 * 3600_000;

/**
 * The runners' side: runners say they are alive, claim agents meant to run and hold them by
 * lease, learn what their owners want, and report what each agent is and what it wrote.
 */
export class RunnerSide {
  constructor(private readonly core: HostingCore) {}

  /** Ends the failures of agents that ran without an error for the error window. */
  endQuietFailures(): Promise<number> {
    return this.core.failures.endQuiet();
  }

  /** Records that the runner is alive, with how many agents it runs at most. */
  async heartbeat(runnerId: string, host: string, capacity: number): Promise<void> {
    const now = this.core.clock.now();
    await this.core.store.repos.hosting.heartbeat(
      runnerId,
      host,
      capacity,
      now,
      now - RUNNER_FORGET_MS,
    );
  }

  /**
   * Takes agents meant to run that no runner holds (or whose runner's lease ran out), so that
   * the runner holds at most `max`; answers those newly held, for `leaseMs`.
   */
  async claim(runnerId: string, max: number, leaseMs: number): Promise<string[]> {
    const now = this.core.clock.now();
    const { hosting } = this.core.store.repos;
    const room = max - (await hosting.countHeld(runnerId, now));
    return hosting.claim(runnerId, room, now, now + leaseMs);
  }

  /**
   * Extends the runner's hold on every agent it holds for `leaseMs`, and answers them with
   * what their owners want. An agent missing from the answer (deleted, or taken by another
   * runner after the lease ran out) is no longer the runner's to run.
   */
  async renew(runnerId: string, leaseMs: number): Promise<HeldAgentState[]> {
    const held = await this.core.store.repos.hosting.renew(
      runnerId,
      this.core.clock.now() + leaseMs,
    );
    return held.map((row) => ({
      address: row.address,
      desired: row.desired_state as DesiredState,
      codeDigest: row.code_digest,
      network: row.network as AgentNetwork,
    }));
  }

  async release(runnerId: string, address: string): Promise<void> {
    await this.core.store.repos.hosting.release(runnerId, address);
  }

  /** What the runner needs to start the agent's process; 404 when it is gone or has no code. */
  async runSpec(address: string): Promise<HostedRunSpec> {
    const { hosting, agents } = this.core.store.repos;
    const [row, listing] = await Promise.all([hosting.find(address), agents.find(address)]);
    if (!row || !listing) throw notFound(address);
    if (row.code === null || row.code_digest === null) {
      throw new NotFoundError(`Hosted agent ${address} has no code to run`);
    }
    const key = this.core.key.get();
    const secrets: Record<string, string> = {};
    for (const secret of await hosting.secrets(address)) {
      secrets[secret.name] = unseal(
        key,
        secret.ciphertext,
        sealContext('secret', address, secret.name),
      );
    }
    return {
      address,
      seed: unseal(key, row.seed_ciphertext, sealContext('seed', address)),
      name: listing.name,
      network: row.network as AgentNetwork,
      files: parseCode(row.code),
      secrets,
      codeDigest: row.code_digest,
    };
  }

  /**
   * Records what the agent is and why (and, when given, how often it restarted); a change of
   * state or reason goes on its timeline too. Nothing happens for an agent that is gone.
   */
  async setState(
    address: string,
    state: HostedState,
    reason: string | null,
    restarts?: number,
  ): Promise<void> {
    const row = await this.core.store.repos.hosting.find(address);
    if (!row) return;
    if (restarts !== undefined) await this.core.store.repos.hosting.update(address, { restarts });
    await this.core.changeState(row, state, reason);
  }

  /**
   * Adds lines to the agent's log (each cut to {@link MAX_LOG_ENTRY} characters), keeping its
   * newest `logLines`. Error lines open or add to the agent's failure (its timeline row, updated
   * in place: a traceback as its exception, with the traceback; see failures.ts), and make the
   * agent failing, with the last one's exception as the reason. Nothing happens for an agent
   * that is gone.
   */
  async appendLogs(address: string, lines: HostedLogLine[]): Promise<void> {
    if (lines.length === 0) return;
    const kept = lines.slice(-this.core.policy.logLines);
    const rows = kept.map((line) => ({
      address,
      time: line.time.getTime(),
      level: line.level,
      type: line.type,
      entry: storableEntry(line.entry),
    }));
    try {
      await this.core.store.repos.hosting.appendLogs(address, rows, this.core.policy.logLines);
    } catch (err) {
      // The agent was deleted while its runner still wrote (its rows reference the agent).
      if (!(await this.core.store.repos.hosting.find(address))) return;
      throw err;
    }
    // Errors are grouped into the agent's failure: one timeline row however often it raises.
    await this.core.failures.failed(
      address,
      rows.flatMap((row, i) => {
        if (row.level !== 'erro') return [];
        const exception = kept[i]!.exception;
        return [
          {
            at: row.time,
            logType: row.type,
            message: exception === undefined ? row.entry : storableEntry(exception),
            ...(exception === undefined
              ? {}
              : { exception: exceptionClass(exception), traceback: row.entry }),
          },
        ];
      }),
    );
  }
}

/** `KeyError` of `KeyError: 'x'`, `json.decoder.JSONDecodeError` of its line: the exception's class. */
function exceptionClass(line: string): string {
  const colon = line.indexOf(':');
  return (colon === -1 ? line : line.slice(0, colon)).trim().slice(0, 500);
}
