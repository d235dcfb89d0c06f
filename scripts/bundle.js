/**
 * The shipped command line as one file: `dist/agentry.js`, what `npm start`, the `agentry`
 * command and the container image run. tsc compiles src/ to dist/ module by module; this joins
 * dist/cli/main.js, the modules it imports and the pure JavaScript packages they use into one
 * ES module (with a source map back to src/). Node then starts the program without resolving,
 * reading and linking about a thousand modules one by one: an admin command takes about half
 * the CPU time to start, the server about two thirds (docs/operations.md, "Start-up").
 *
 * What stays a module of its own, loaded from dist/ or node_modules/ as before:
 * - the worker threads' modules (dist/infra/verifier-worker.js, dist/store/checkpoint-worker.js),
 *   which their threads load by path;
 * - the packages in {@link KEPT_OUT}, each for the reason given beside it.
 *
 * A module of ours that finds a file beside itself (`new URL('…', import.meta.url)`: the
 * console's pages, the hosted agents' bootstrap, package.json, the workers) keeps finding it:
 * each `import.meta.url` in our modules is rewritten to the URL that module had in dist/. A
 * package that finds files by `__dirname` or `__filename` cannot be joined (in an ES module
 * they do not exist); the build fails when one that is not kept out or known to be safe does.
 */
import { chmod, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';

/** Packages not joined into the bundle, and why. */
const KEPT_OUT = {
  'better-sqlite3': 'a native addon, loaded from its build directory',
  secp256k1: 'a native addon, loaded from its build directory',
  'pg-native': 'an optional native addon (not installed) that pg asks for only when told to',
  pino: 'its transports run in worker threads that load modules by path',
  '@fastify/swagger': 'reads its own package.json by __dirname',
  '@fastify/swagger-ui': 'serves the files of its own static/ directory',
  ioredis: 'reads its package.json, and trims error stacks, by __dirname',
};

/**
 * Packages joined although their code names `__dirname` or `__filename`, each read and found
 * safe, for the reason given beside it (read them again when upgrading across a major version).
 */
const KNOWN_SAFE = {
  undici: 'reads __filename only after `typeof __filename !== "undefined"`',
  commander: 'names __dirname and __filename in comments only',
};

/** The package of a bare import (`kysely/helpers/postgres` → `kysely`). */
function packageOf(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/**
 * The package a file in node_modules belongs to (the innermost, for a package installed inside
 * another's node_modules), or none for a file of ours.
 */
function packageOfFile(path) {
  const match = [...path.matchAll(/node_modules[\\/]((?:@[^\\/]+[\\/])?[^\\/]+)/g)].at(-1);
  return match ? match[1].replace('\\', '/') : undefined;
}

/**
 * The bundle with every character beyond Latin-1 in its comments replaced by `?`. esbuild
 * escapes such characters in code (its output is ASCII) but copies comments as they are, and a
 * single one (an ellipsis, a dash, a curly quote in a comment of ours or of a package) makes V8
 * keep the whole source, which it holds for as long as the process runs, two bytes to the
 * character: 13 MB instead of 6.5. One `?` per UTF-16 unit keeps every column, so the source
 * map still points where it did. Fails if the code itself, without its comments, has such a
 * character (esbuild would have had to stop escaping them).
 */
async function latin1Comments(text, transform) {
  const beyond = /[^\0-\xff]/g;
  const { code } = await transform(text, { loader: 'js', format: 'esm', minifyWhitespace: true });
  const found = code.match(beyond);
  if (found) {
    throw new Error(`the bundle's code has characters beyond Latin-1 outside comments: ${found}`);
  }
  return text.replace(beyond, '?');
}

/** Bundles `dist/cli/main.js` (compiled by tsc) into `dist/agentry.js`. */
export async function bundle(root) {
  const { build, transform } = await import('esbuild');
  const dist = join(root, 'dist');
  const outfile = join(dist, 'agentry.js');
  const result = await build({
    entryPoints: [join(dist, 'cli/main.js')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // Characters beyond ASCII in code are escaped (esbuild's default, relied on here).
    charset: 'ascii',
    // The map leads from the bundle through tsc's maps to src/ (`node --enable-source-maps`),
    // without copying the sources into it.
    sourcemap: 'linked',
    sourcesContent: false,
    metafile: true,
    // Written below, once the bundle's text is made Latin-1.
    write: false,
    absWorkingDir: root,
    logLevel: 'warning',
    // The CommonJS packages joined call `require` for Node's own modules and optional ones.
    banner: {
      js: "import { createRequire as agentryRequire } from 'node:module';\nconst require = agentryRequire(import.meta.url);",
    },
    plugins: [
      {
        name: 'agentry',
        setup(build) {
          build.onResolve({ filter: /^[^./]/ }, ({ path }) => {
            if (path.startsWith('node:') || packageOf(path) in KEPT_OUT) {
              return { path, external: true };
            }
            return undefined;
          });
          build.onLoad({ filter: /\.js$/ }, async ({ path }) => {
            // Our modules are the ones under dist/ (which may itself lie under a node_modules,
            // as a benchmark's build of another commit does); packages load as they are.
            if (!path.startsWith(dist + sep)) return undefined;
            const text = await readFile(path, 'utf8');
            if (!text.includes('import.meta.url')) return undefined;
            const own = `./${relative(dirname(outfile), path).split(sep).join('/')}`;
            return {
              contents: text.replaceAll(
                'import.meta.url',
                `new URL(${JSON.stringify(own)}, import.meta.url).href`,
              ),
              loader: 'js',
              resolveDir: dirname(path),
            };
          });
        },
      },
    ],
  });
  for (const { path, text } of result.outputFiles) {
    await writeFile(path, path === outfile ? await latin1Comments(text, transform) : text);
  }
  // A command (it starts with `#!/usr/bin/env node`), executable as esbuild leaves such a file.
  await chmod(outfile, 0o755);
  const unsafe = new Map();
  for (const input of Object.keys(result.metafile.inputs)) {
    const name = packageOfFile(input);
    if (name === undefined || name in KNOWN_SAFE) continue;
    const text = await readFile(join(root, input), 'utf8');
    const names = ['__dirname', '__filename'].filter((word) => text.includes(word));
    if (names.length > 0) unsafe.set(input, names);
  }
  if (unsafe.size > 0) {
    throw new Error(
      `these files of packages in the bundle find files beside them, which a bundle cannot:\n${[
        ...unsafe,
      ]
        .map(([file, names]) => `  ${file} (${names.join(', ')})`)
        .join('\n')}\nkeep their package out of the bundle (KEPT_OUT in scripts/bundle.js), ` +
        'or, after reading them, list it in KNOWN_SAFE with why',
    );
  }
}
