import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A Python interpreter that can run hosted agents: it has `uagents`. */
export interface HostingPython {
  /** The interpreter itself, as it names itself (`sys.executable`). */
  python: string;
  /** Its version, `3.11.2`. */
  pythonVersion: string;
  /** The uagents release installed; undefined for a package without metadata. */
  uagents: string | undefined;
}

/** What the search found: an interpreter, or why there is none and the command that makes one. */
export type PythonSearch =
  | { python: HostingPython; reason?: undefined; enable?: undefined }
  | { python?: undefined; reason: string; enable: string };

/**
 * The one command that gives Agentry an interpreter that runs hosted agents where it looks for
 * one (see {@link findHostingPython}): a virtual environment with uagents, in the directory it
 * is started from. A virtual environment, since the system's Python often refuses packages
 * installed by pip (PEP 668).
 */
export const MAKE_HOSTING_PYTHON = 'python3 -m venv .venv && .venv/bin/pip install uagents';

/** Where Agentry looks for a Python with uagents when none is set, in this order. */
export function pythonCandidates(directory = process.cwd()): string[] {
  const venv = resolve(directory, '.venv', 'bin', 'python');
  return [...(existsSync(venv) ? [venv] : []), 'python3'];
}

/**
 * Prints the interpreter, its version, whether uagents is installed and its release, as JSON;
 * importing as little as it can.
 */
const PROBE = [
  'import importlib.util, json, sys',
  'found = importlib.util.find_spec("uagents") is not None',
  'release = None',
  'if found:',
  '    try:',
  '        import importlib.metadata',
  '        release = importlib.metadata.version("uagents")',
  '    except Exception:',
  '        pass',
  'version = ".".join(str(part) for part in sys.version_info[:3])',
  'print(json.dumps({"python": sys.executable, "version": version, "found": found, "release": release}))',
].join('\n');

interface Probe {
  python: string;
  version: string;
  found: boolean;
  release: string | null;
}

/**
 * Looks for a Python that can run hosted agents (docs/hosting.md, "Running agents"): the first
 * of `candidates` (see {@link pythonCandidates}) that has uagents installed. It asks where the
 * package is rather than importing it, so the search costs a Python start (tens of
 * milliseconds), not uagents' import (a second or more).
 */
export async function findHostingPython(candidates = pythonCandidates()): Promise<PythonSearch> {
  const without: string[] = [];
  for (const candidate of candidates) {
    const probe = await probeInterpreter(candidate);
    if (probe === undefined) continue;
    if (probe.found) {
      return {
        python: {
          python: probe.python,
          pythonVersion: probe.version,
          uagents: probe.release ?? undefined,
        },
      };
    }
    without.push(`${candidate} (Python ${probe.version})`);
  }
  return {
    reason:
      without.length === 0
        ? 'no python3 was found on the PATH'
        : `${without.join(' and ')} ${without.length === 1 ? 'has' : 'have'} no uagents`,
    enable: MAKE_HOSTING_PYTHON,
  };
}

/** What `python` says of itself; undefined when it does not run. */
async function probeInterpreter(python: string): Promise<Probe | undefined> {
  try {
    const { stdout } = await run(python, ['-c', PROBE], { timeout: 10_000 });
    const probe = JSON.parse(stdout.trim().split('\n').pop() ?? '') as Probe;
    return typeof probe.python === 'string' && probe.python !== '' ? probe : undefined;
  } catch {
    return undefined;
  }
}
