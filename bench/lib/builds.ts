import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { repositoryRoot } from '../../test/kit/process.js';
import type { SeedOptions } from './seed.js';
import { buildService } from './server.js';

/** What a build's own seeding module offers: its store, opened on a server's database. */
interface SeedModule {
  openStore(databaseUrl: string): { close(): Promise<void> };
  seedMessages(store: unknown, options: SeedOptions): Promise<void>;
}

/**
 * A checkout of Agentry whose compiled server a benchmark runs: this working tree, or a
 * git ref checked out beside it. Each build seeds databases with its own code, since the
 * rows a database holds follow the schema of the build that made it.
 */
export interface Build {
  /** How reports name it: "working tree", or the ref as given. */
  label: string;
  /** The commit it was made from, with "+ changes" for a working tree that has them. */
  commit: string;
  /** The checkout's root: `dist/agentry.js` there (`dist/cli/main.js` in older builds) is what runs. */
  root: string;
  /** The build's own `seedMessages`, on a store it opens on `databaseUrl`. */
  seed(databaseUrl: string): Seeder;
}

/** Seeding of one database; `close` releases its connections. */
export interface Seeder {
  seedMessages(options: SeedOptions): Promise<void>;
  close(): Promise<void>;
}

function git(args: string[], cwd = repositoryRoot): string {
  const result = spawnSync('git', args, { cwd, encoding: 'utf8' });
  if (result.status !== 0) {
    throw new Error(`git ${args.join(' ')} failed: ${(result.stderr || result.stdout).trim()}`);
  }
  return result.stdout.trim();
}

async function loadSeeding(root: string): Promise<SeedModule> {
  const path = join(root, 'bench/lib/seed.ts');
  if (!existsSync(path)) throw new Error(`${path} does not exist: this build cannot be seeded`);
  return (await import(pathToFileURL(path).href)) as SeedModule;
}

function seederOf(seeding: SeedModule, databaseUrl: string): Seeder {
  let store: { close(): Promise<void> } | undefined;
  return {
    seedMessages: (options) =>
      seeding.seedMessages((store ??= seeding.openStore(databaseUrl)), options),
    close: async () => {
      await store?.close();
    },
  };
}

/** This working tree, compiled as `npm start` compiles it. */
export async function workingTreeBuild(): Promise<Build> {
  await buildService(repositoryRoot);
  const seeding = await loadSeeding(repositoryRoot);
  const changed = git(['status', '--porcelain', '--untracked-files=no']) !== '';
  return {
    label: 'working tree',
    commit: `${git(['rev-parse', '--short=12', 'HEAD'])}${changed ? ' + changes' : ''}`,
    root: repositoryRoot,
    seed: (databaseUrl) => seederOf(seeding, databaseUrl),
  };
}

/**
 * `ref` checked out in a git worktree under node_modules/.cache (kept for the next compare
 * against the same commit, and gone with the next `npm ci`) and compiled there. Its
 * dependencies are this tree's when both lockfiles are the same (a link to node_modules),
 * otherwise installed there with `npm ci`.
 */
export async function buildOfRef(ref: string, progress: (line: string) => void): Promise<Build> {
  const commit = git(['rev-parse', '--verify', '--short=12', `${ref}^{commit}`]);
  const root = join(repositoryRoot, 'node_modules/.cache/agentry-compare', commit);
  if (!existsSync(join(root, 'node_modules'))) {
    rmSync(root, { recursive: true, force: true });
    git(['worktree', 'prune']);
    git(['worktree', 'add', '--detach', '--quiet', root, commit]);
    const lockfile = (dir: string): string => readFileSync(join(dir, 'package-lock.json'), 'utf8');
    if (lockfile(root) === lockfile(repositoryRoot)) {
      symlinkSync(join(repositoryRoot, 'node_modules'), join(root, 'node_modules'), 'dir');
    } else {
      progress(`${ref}: its dependencies differ from this tree's; installing them with npm ci`);
      const install = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], {
        cwd: root,
        encoding: 'utf8',
      });
      if (install.status !== 0) {
        rmSync(join(root, 'node_modules'), { recursive: true, force: true });
        throw new Error(`npm ci for ${ref} failed:\n${install.stderr}`);
      }
    }
  }
  await buildService(root);
  const seeding = await loadSeeding(root);
  return {
    label: ref,
    commit,
    root,
    seed: (databaseUrl) => seederOf(seeding, databaseUrl),
  };
}
