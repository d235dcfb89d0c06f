import type { NewActivity } from '../../store/repositories/activity.js';
import type { HostedErrors, HostedFailureRow } from '../../store/repositories/hosting.js';
import { isoTimestamp } from '../../wire/common.js';
import type { HostingCore } from './core.js';

/** What one error line of a hosted agent's log says. */
export interface HostedError {
  at: number;
  /** Its exception (`KeyError: 'x'`), or the line itself. */
  message: string;
  /** The exception's class, when the line is a traceback. */
  exception?: string;
  /** The traceback, when the line is one. */
  traceback?: string;
  logType: string;
}

/** A crash of a hosted agent's process, or its failure to start: the state it left it in. */
export interface HostedCrash {
  at: number;
  /** `crashed` (to be restarted) or `failed` (given up). */
  state: string;
  /** Why, as its state says. */
  reason: string | null;
  /** The state it was in before. */
  previous: string;
  /** What the agent's timeline says of it (`Hosted agent crashed: exited with code 1; …`). */
  message: string;
}

/** What brought a failure's latest error: a line of the agent's log, or a crash. */
type Latest = { line: HostedError } | { crash: HostedCrash };

/** The most failures one housekeeping run ends. */
const END_BATCH = 500;

/**
 * Failures of hosted agents (docs/hosting.md, "Errors"): a hosted agent whose code raises again
 * and again, or whose process crashes again and again (a crash loop, restarted after a growing
 * wait), is one failure, not one timeline row per exception or crash. The first error or crash
 * opens it: one `event.error` row (updated in place as more follow: how many errors and crashes,
 * the last one and when), one warning, and so one webhook. It ends when the agent has run for
 * the error window (`AGENTRY_AGENT_ERROR_SECONDS`, when its status also stops being failing)
 * without an error, and without being restarted meanwhile (a restart, clean or not, starts the
 * wait again): one `event.info` row saying it recovered (the webhook `agent.recovered`) and one
 * warning. Each row is written by the process whose statement opened or ended the failure.
 */
export class HostedFailures {
  constructor(private readonly core: HostingCore) {}

  /** Error lines of the agent's log: they open its failure, or add to the open one. */
  async failed(address: string, lines: HostedError[]): Promise<void> {
    if (lines.length === 0) return;
    const last = lines[lines.length - 1]!;
    await this.add(
      address,
      {
        first: Math.min(...lines.map((line) => line.at)),
        last: Math.max(...lines.map((line) => line.at)),
        count: lines.length,
        crashes: 0,
        error: last.message,
      },
      { line: last },
    );
  }

  /**
   * The agent's process crashed or could not start (its state became `crashed` or `failed`): it
   * opens the agent's failure, or adds to the open one.
   */
  async crashed(address: string, crash: HostedCrash): Promise<void> {
    await this.add(
      address,
      { first: crash.at, last: crash.at, count: 0, crashes: 1, error: crash.message },
      { crash },
    );
  }

  private async add(address: string, errors: HostedErrors, latest: Latest): Promise<void> {
    const { hosting } = this.core.store.repos;
    const opened = await hosting.openFailure(address, errors);
    if (opened) await this.began(opened, latest);
    else {
      const extended = await hosting.extendFailure(address, errors);
      if (extended) await this.update(extended, latest);
      else {
        // Ended between the two statements: these errors begin the next one.
        const reopened = await hosting.openFailure(address, errors);
        if (reopened) await this.began(reopened, latest);
      }
    }
    // Its status is failing for the error window after the last error.
    await this.core.timeline.errored(address, errors.error);
  }

  /** Ends the failures of agents that ran without an error for the error window. */
  async endQuiet(): Promise<number> {
    const now = this.core.clock.now();
    const ended = await this.core.store.repos.hosting.endQuietFailures(
      now - this.core.policy.errorWindowMs,
      END_BATCH,
    );
    for (const failure of ended) await this.recovered(failure, now);
    return ended.length;
  }

  private async began(failure: HostedFailureRow, last: Latest): Promise<void> {
    const [entry] = await this.core.timeline.recordRows([
      {
        address: failure.address,
        kind: 'event.error',
        at: Number(failure.began_at),
        category: 'system',
        ...said(failure, last, null),
      },
    ]);
    if (entry) {
      await this.core.store.repos.hosting.setFailureEntry(
        failure.address,
        Number(failure.began_at),
        Number(entry.id),
      );
    }
    this.core.logger.warn(
      { agent: failure.address, error: failure.error },
      'crash' in last
        ? `hosted agent failing: its process ${last.crash.state === 'failed' ? 'failed' : 'crashed'}`
        : 'hosted agent failing: its code raises',
    );
  }

  private async update(failure: HostedFailureRow, last: Latest): Promise<void> {
    if (failure.entry_id === null) return;
    await this.core.store.repos.activity.update(
      Number(failure.entry_id),
      said(failure, last, null),
    );
  }

  private async recovered(failure: HostedFailureRow, now: number): Promise<void> {
    if (failure.entry_id !== null) {
      await this.core.store.repos.activity.update(
        Number(failure.entry_id),
        said(failure, null, now),
      );
    }
    const errors = Number(failure.errors);
    const crashes = Number(failure.crashes);
    const seconds = Math.round((Number(failure.last_at) - Number(failure.began_at)) / 1000);
    const quiet = Math.round((now - Number(failure.last_at)) / 1000);
    const text = `recovered: no error for ${quiet} s after ${counted(failure)} over ${seconds} s`;
    await this.core.timeline.recordRows([
      {
        address: failure.address,
        kind: 'event.info',
        at: now,
        category: 'system',
        message: text,
        data: JSON.stringify({ hosted: { recovered: true }, ...failureData(failure) }),
      },
    ]);
    this.core.logger.warn(
      { agent: failure.address, errors, crashes, seconds },
      `hosted agent ${text}`,
    );
  }
}

/**
 * What a failure's row says of it: the latest error or crash (with its traceback, or the state
 * the crash left the agent in, when `last`, what brought it, is given), how many so far, and
 * when it ended, if it has.
 */
function said(
  failure: HostedFailureRow,
  last: Latest | null,
  endedAt: number | null,
): Pick<NewActivity, 'message' | 'data'> {
  const count = counted(failure);
  const error = failure.error ?? 'unknown error';
  const line = last !== null && 'line' in last ? last.line : undefined;
  const crash = last !== null && 'crash' in last ? last.crash : undefined;
  return {
    message:
      endedAt === null
        ? `${error} (failing: ${count} so far)`
        : `${error} (failed for ${Math.round((Number(failure.last_at) - Number(failure.began_at)) / 1000)} s: ${count}; recovered)`,
    data: JSON.stringify({
      hosted:
        crash === undefined
          ? { log_type: line?.logType ?? null, failing: endedAt === null }
          : {
              state: crash.state,
              reason: crash.reason,
              previous: crash.previous,
              failing: endedAt === null,
            },
      ...(line?.exception !== undefined
        ? { exception: line.exception, traceback: line.traceback }
        : {}),
      ...failureData(failure),
      ended_at: endedAt === null ? null : isoTimestamp(endedAt),
    }),
  };
}

function failureData(failure: HostedFailureRow): Record<string, unknown> {
  return {
    first_error_at: isoTimestamp(Number(failure.began_at)),
    last_error_at: isoTimestamp(Number(failure.last_at)),
    errors: Number(failure.errors),
    crashes: Number(failure.crashes),
    error: failure.error,
  };
}

/** How many errors and crashes the failure has seen, in words (`12 errors and 1 crash`). */
function counted(failure: HostedFailureRow): string {
  const errors = Number(failure.errors);
  const crashes = Number(failure.crashes);
  const parts: string[] = [];
  if (errors > 0 || crashes === 0) parts.push(`${errors} ${errors === 1 ? 'error' : 'errors'}`);
  if (crashes > 0) parts.push(`${crashes} ${crashes === 1 ? 'crash' : 'crashes'}`);
  return parts.join(' and ');
}
