import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, cpSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { repositoryRoot } from './process.js';

/**
 * What the tests of hosted agents share: the Python interpreter, the stand-in `uagents`
 * package (test/fixtures/hosting/stand-in, for interpreters without the real one) and the
 * hosted agent code they deploy.
 */

export const hostingFixtures = join(repositoryRoot, 'test/fixtures/hosting');
/** The directory to put on PYTHONPATH for `import uagents` to find the stand-in. */
export const standInPath = join(hostingFixtures, 'stand-in');
/** Hosted code that answers each Request with a Reply (see the file). */
export const echoAgentFile = join(hostingFixtures, 'echo_agent.py');

/**
 * The interpreter's own path (`sys.executable`, not a shim that a sandbox cannot follow):
 * AGENTRY_TEST_PYTHON or `python3`; undefined when there is none.
 */
export function pythonExecutable(): string | undefined {
  const result = spawnSync(
    process.env.AGENTRY_TEST_PYTHON ?? 'python3',
    ['-c', 'import sys; print(sys.executable)'],
    { encoding: 'utf8' },
  );
  return result.status === 0 ? result.stdout.trim() : undefined;
}

/**
 * An interpreter with the stand-in installed, as an operator's would have uagents: a virtual
 * environment made in `dir` (without pip) with the package copied into its site-packages. Its
 * base is the system's `/usr/bin/python3` where there is one, since a sandboxed agent runs as a
 * user of its own that may not read an interpreter kept in root's home; `dir` is opened to
 * other users for the same reason.
 */
export function standInInterpreter(dir: string): string {
  const base = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : pythonExecutable();
  if (base === undefined) throw new Error('no Python interpreter to make an environment from');
  const made = spawnSync(base, ['-m', 'venv', '--without-pip', dir], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`python -m venv failed: ${made.stdout}${made.stderr}`);
  const python = join(dir, 'bin', 'python3');
  const site = spawnSync(
    python,
    ['-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
    {
      encoding: 'utf8',
    },
  );
  if (site.status !== 0) throw new Error(`no site-packages in ${dir}: ${site.stderr}`);
  cpSync(join(standInPath, 'uagents'), join(site.stdout.trim(), 'uagents'), {
    recursive: true,
    filter: (source) => !source.includes('__pycache__'),
  });
  chmodSync(dir, 0o755);
  return python;
}

/** Whether `python` can import `module` with the given environment. */
export function canImport(python: string, module: string, env: NodeJS.ProcessEnv = {}): boolean {
  const result = spawnSync(python, ['-c', `import ${module}`], {
    env: { ...process.env, PYTHONPATH: '', ...env },
  });
  return result.status === 0;
}

/**
 * uAgents' `Model.build_schema_digest`: sha256 of pydantic v1's `schema_json(indent=None,
 * sort_keys=True)`. The stand-in writes the same schema text (its unittest compares it with
 * pydantic's), so one digest addresses the same handler on either package.
 */
export function schemaDigest(schemaJson: string): string {
  return `model:${createHash('sha256').update(schemaJson, 'utf8').digest('hex')}`;
}

/** The echo agent's models. */
export const REQUEST_DIGEST = schemaDigest(
  '{"properties": {"text": {"title": "Text", "type": "string"}}, "required": ["text"], ' +
    '"title": "Request", "type": "object"}',
);
export const REPLY_DIGEST = schemaDigest(
  '{"properties": {"count": {"title": "Count", "type": "integer"}, "text": {"title": "Text", ' +
    '"type": "string"}}, "required": ["text", "count"], "title": "Reply", "type": "object"}',
);
