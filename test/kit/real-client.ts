import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The real uAgents client, for the tests that run unmodified uAgents agents against Agentry.
 * Each release is found through an environment variable naming a Python interpreter that has
 * it installed (`.ci/run` makes these environments from the client's releases and exports the
 * variables): AGENTRY_TEST_PYTHON for the current release (0.25), AGENTRY_TEST_PYTHON_022 for
 * 0.22 (the v1 mailroom). Where the interpreter is not there or has no such release, the tests
 * skip and say why.
 */

export interface RealClient {
  /** The interpreter's own path (`sys.executable`), or undefined when the tests skip. */
  python: string | undefined;
  /** The installed uagents release, e.g. `0.25.5`. */
  version: string | undefined;
  /** Why the tests skip, or false when the real client is there. */
  skip: string | false;
}

export interface RealClientOptions {
  /** The release series the tests need (`0.25`); any release of the real package otherwise. */
  series?: string;
  /** The interpreter to try when the variable is unset; none makes an unset variable a skip. */
  fallback?: string;
}

/** The real uAgents client of the interpreter that `variable` names. */
export function realClient(variable: string, options: RealClientOptions = {}): RealClient {
  const { series, fallback } = options;
  const wanted = `uAgents ${series ?? ''}`.trim();
  const how = `set ${variable} to a Python interpreter with the real ${wanted} (the real client's make-venv.sh makes one; .ci/run does)`;
  const named = process.env[variable];
  const python = named !== undefined && named !== '' ? named : fallback;
  if (python === undefined) {
    return { python: undefined, version: undefined, skip: `${variable} is not set: ${how}` };
  }
  const which = python === named ? `${python} (${variable})` : `${python} (${variable} is not set)`;
  // The package's metadata: the test stand-in, a bare `uagents` directory, has none.
  const probe = spawnSync(
    python,
    [
      '-c',
      'import sys, importlib.metadata as m, uagents; print(sys.executable); print(m.version("uagents"))',
    ],
    { encoding: 'utf8', env: { ...process.env, PYTHONPATH: '' } },
  );
  if (probe.error !== undefined) {
    return {
      python: undefined,
      version: undefined,
      skip: `${which} cannot be run (${probe.error.message}): ${how}`,
    };
  }
  if (probe.status !== 0) {
    const last = probe.stderr.trim().split('\n').pop() ?? '';
    return {
      python: undefined,
      version: undefined,
      skip: `${which} cannot import the real uagents (${last}): ${how}`,
    };
  }
  const [executable, version] = probe.stdout.trim().split('\n');
  if (series !== undefined && !version!.startsWith(`${series}.`)) {
    return {
      python: undefined,
      version,
      skip: `${which} has uagents ${version}, not ${series}: ${how}`,
    };
  }
  return { python: executable!, version, skip: false };
}

/** A line a script printed as JSON. */
export type ScriptLine = Record<string, unknown>;

/** A Python script running, its JSON lines collected as it prints them. */
export interface RunningScript {
  child: ChildProcess;
  /** Each line of its standard output that is a JSON object, in order. */
  lines: ScriptLine[];
  /** The last of what it printed, both streams, for a failure's message. */
  output: () => string;
  exited: Promise<number | null>;
}

/**
 * Runs `script` (in `cwd`) with the interpreter `python`, through `launcher` when given (a
 * command line prefix, such as the one that runs it inside a network namespace).
 */
export function runScript(
  python: string,
  script: string,
  args: string[],
  cwd: string,
  launcher: string[] = [],
): RunningScript {
  const [command, ...prefix] = [...launcher, python];
  const child = spawn(command!, [...prefix, script, ...args], {
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: ScriptLine[] = [];
  let pending = '';
  let text = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    text += chunk.toString();
    pending += chunk.toString();
    let newline: number;
    while ((newline = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, newline).trim();
      pending = pending.slice(newline + 1);
      if (line.startsWith('{')) lines.push(JSON.parse(line) as ScriptLine);
    }
  });
  child.stderr!.on('data', (chunk: Buffer) => (text += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { child, lines, output: () => text.slice(-6000), exited };
}

/** Asks `probe` every 100 ms until it answers something; fails naming `what` after the timeout. */
export async function waitFor<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** Waits until a uAgents agent's own HTTP server answers (its `/agent_info`). */
export function agentServerUp(agentUrl: string): Promise<true> {
  return waitFor(async () => {
    try {
      return (await fetch(`${agentUrl}/agent_info`)).ok || undefined;
    } catch {
      return undefined;
    }
  }, 'the agent’s server');
}

/**
 * Connects a running uAgents agent with its owner's API key through the agent's own
 * `/connect`, as the inspector and `agentry connect` do; answers what the agent said.
 */
export async function connectAgent(
  agentUrl: string,
  ownerKey: string,
  how: { agent_type: 'mailbox' } | { agent_type: 'proxy'; endpoint: string } = {
    agent_type: 'mailbox',
  },
): Promise<{ success: boolean; detail?: string | null }> {
  const res = await fetch(`${agentUrl}/connect`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ user_token: ownerKey, ...how }),
  });
  return (await res.json()) as { success: boolean; detail?: string | null };
}

/**
 * A mailbox agent just started (its first JSON line names its `address`), made ready as its
 * owner makes it: its server up, connected with the owner's key, and polling its mailbox (a
 * held poll waits for the first message). Answers its address.
 */
export async function readyMailboxAgent(
  agent: RunningScript,
  agentUrl: string,
  server: { url: string; userKey: string },
): Promise<string> {
  const address = (await waitFor(() => agent.lines[0], 'the agent to start')).address as string;
  await agentServerUp(agentUrl);
  const connected = await connectAgent(agentUrl, server.userKey);
  if (!connected.success) {
    throw new Error(`the agent could not connect: ${connected.detail ?? agent.output()}`);
  }
  await waitFor(async () => {
    const listing = await fetch(`${server.url}/v2/agents/${address}`, {
      headers: { authorization: `Bearer ${server.userKey}` },
    });
    const body = (await listing.json()) as { status?: { last_seen?: string | null } };
    return body.status?.last_seen ?? undefined;
  }, 'the agent’s first poll');
  return address;
}
