#!/usr/bin/env node
/**
 * Builds what `npm start` runs: the server (TypeScript, tsc → dist/, then joined into one file,
 * dist/agentry.js: scripts/bundle.js) and the console (vite → dist/web/). `npm run build`
 * builds both, every time; `npm run build -- server` (or `web`) the one named. `npm start`
 * runs it with `--changed`: a part is built only when one of its inputs changed since its last
 * build (a file added, removed, modified or touched), told by a fingerprint of its inputs'
 * paths, sizes and modification times kept in dist/build-stamps.json; tsc builds
 * incrementally (dist/tsconfig.build.tsbuildinfo), compiling only what a change reaches.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundle } from './bundle.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const stampsFile = join(root, 'dist/build-stamps.json');
const changedOnly = process.argv.includes('--changed');
const named = process.argv.slice(2).filter((arg) => !arg.startsWith('--'));

/** What every part depends on: the dependencies installed and this script. */
const shared = ['package.json', 'package-lock.json', 'scripts/build.js'];

const parts = [
  {
    name: 'server',
    output: 'dist/agentry.js',
    inputs: ['src', 'tsconfig.json', 'tsconfig.build.json', 'scripts/bundle.js', ...shared],
    async build() {
      // A full build starts over; otherwise tsc compiles what changed since its last build.
      if (!changedOnly) rmSync(join(root, 'dist/tsconfig.build.tsbuildinfo'), { force: true });
      run('node_modules/typescript/bin/tsc', ['-p', 'tsconfig.build.json']);
      await bundle(root);
    },
  },
  {
    name: 'web',
    output: 'dist/web/index.html',
    // The console imports the wire schemas (and what they import) from src/.
    inputs: ['web', 'src/wire', 'src/crypto', 'src/errors.ts', ...shared],
    build() {
      run('node_modules/vite/bin/vite.js', ['build', '--config', 'web/vite.config.ts']);
    },
  },
];

function run(script, args) {
  const result = spawnSync(process.execPath, [join(root, script), ...args], {
    cwd: root,
    stdio: 'inherit',
  });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

/** The files at `path` (a file, or every file under a directory); none when it is missing. */
function filesAt(path) {
  const full = join(root, path);
  if (!existsSync(full)) return [];
  if (!statSync(full).isDirectory()) return [path];
  return readdirSync(full).flatMap((name) => filesAt(join(path, name)));
}

function fingerprint(inputs) {
  const hash = createHash('sha256');
  for (const path of [...new Set(inputs.flatMap(filesAt))].sort()) {
    const { size, mtimeMs } = statSync(join(root, path));
    hash.update(`${path}\0${size}\0${mtimeMs}\n`);
  }
  return hash.digest('hex');
}

function readStamps() {
  try {
    return JSON.parse(readFileSync(stampsFile, 'utf8'));
  } catch {
    return {};
  }
}

const unknown = named.filter((name) => !parts.some((part) => part.name === name));
if (unknown.length > 0) {
  console.error(`build: no part ${unknown.join(', ')}: the parts are server and web`);
  process.exit(2);
}
for (const part of parts) {
  if (named.length > 0 && !named.includes(part.name)) continue;
  const print = fingerprint(part.inputs);
  if (changedOnly && readStamps()[part.name] === print && existsSync(join(root, part.output))) {
    console.log(`build: ${part.name} unchanged since its last build`);
    continue;
  }
  await part.build();
  mkdirSync(join(root, 'dist'), { recursive: true });
  writeFileSync(stampsFile, JSON.stringify({ ...readStamps(), [part.name]: print }));
}
