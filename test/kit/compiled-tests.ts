import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { repositoryRoot } from './process.js';

/**
 * The test files as `npm test` runs them: compiled from TypeScript beforehand, all at once, to
 * plain JavaScript modules that Node loads without a loader.
 *
 * Under tsx each file's process sent every module it loaded, the packages' included, through
 * the loader's thread: some thousand modules for a file that starts a server, 1.8 CPU-seconds
 * to import the kit's server (`test/kit/server.ts`), in each of 145 processes; compiled, 0.75.
 * The sources of the project (src/, test/, bench/) are joined by esbuild, the one tsx uses,
 * into one module per test file and chunks they share, and the packages are imported from
 * node_modules/ as they are.
 *
 * A module of ours that finds a file beside itself keeps finding it: `import.meta.url` in our
 * sources is the URL of the source file it is written in, as under tsx (so a worker thread
 * started from one still loads its TypeScript module through tsx, see
 * src/infra/worker-threads.ts). The compiled files lie under node_modules/.cache, so that the
 * packages they import resolve as they did from the sources; source maps lead back to the
 * sources (the files run with `--enable-source-maps`).
 */
export interface CompiledTests {
  /** The compiled module of each test file (as given, relative to the repository's root). */
  files: Map<string, string>;
  /**
   * The test file, relative to the repository's root, that `path` names: a compiled module, or
   * the source itself (where a source map led back to it).
   */
  sourceOf(path: string): string | undefined;
  /** Removes the compiled files. */
  remove(): void;
}

/** Where the runs' compiled files are, each run's in a directory of its own. */
const CACHE = join(repositoryRoot, 'node_modules/.cache/agentry-tests');

/** A run's compiled files older than this were left by a run that was stopped. */
const LEFT_AFTER_MS = 24 * 3600_000;

/**
 * Compiles `testFiles` (relative to the repository's root) into a directory named for `tag`,
 * and removes what runs stopped before their end left (another run may still be using its own).
 */
export async function compileTests(testFiles: string[], tag: string): Promise<CompiledTests> {
  for (const entry of existsSync(CACHE) ? readdirSync(CACHE) : []) {
    const left = join(CACHE, entry);
    if (Date.now() - statSync(left).mtimeMs > LEFT_AFTER_MS) {
      rmSync(left, { recursive: true, force: true });
    }
  }
  const outdir = join(CACHE, tag);
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(outdir, { recursive: true });
  await build({
    entryPoints: testFiles.map((file) => join(repositoryRoot, file)),
    outbase: repositoryRoot,
    outdir,
    entryNames: '[dir]/[name]',
    chunkNames: 'chunks/[name]-[hash]',
    bundle: true,
    splitting: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node20',
    sourcemap: 'linked',
    sourcesContent: false,
    logLevel: 'warning',
    plugins: [
      {
        name: 'source-urls',
        setup(build) {
          // Every TypeScript file loaded is ours: the packages are external.
          build.onLoad({ filter: /\.ts$/ }, ({ path }) => {
            const text = readFileSync(path, 'utf8');
            return {
              contents: text.replace(
                /\bimport\.meta\.url\b/g,
                JSON.stringify(pathToFileURL(path).href),
              ),
              loader: 'ts',
              resolveDir: dirname(path),
            };
          });
        },
      },
    ],
  });
  const files = new Map(
    testFiles.map((file) => [file, join(outdir, file.replace(/\.ts$/, '.js'))] as const),
  );
  const sources = new Map([...files].map(([file, compiled]) => [compiled, file] as const));
  return {
    files,
    sourceOf: (path) =>
      sources.get(path) ??
      (files.has(relative(repositoryRoot, path)) ? relative(repositoryRoot, path) : undefined),
    remove: () => rmSync(outdir, { recursive: true, force: true }),
  };
}
