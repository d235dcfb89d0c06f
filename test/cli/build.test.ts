import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChildRun, repositoryRoot } from '../kit/process.js';

/**
 * `npm start` builds only what changed (scripts/build.js --changed): in a copy of the project,
 * an unchanged tree builds nothing, a changed server source rebuilds the server alone and a
 * touched console source the console alone.
 */
describe('npm start: the build', () => {
  it('builds nothing when nothing changed, and the part whose input changed when one did', async () => {
    const copy = mkdtempSync(join(tmpdir(), 'agentry-build-'));
    try {
      for (const path of [
        'src',
        'web',
        'scripts',
        'tsconfig.json',
        'tsconfig.build.json',
        'package.json',
        'package-lock.json',
        'dist',
      ]) {
        if (!existsSync(join(repositoryRoot, path))) continue;
        cpSync(join(repositoryRoot, path), join(copy, path), {
          recursive: true,
          preserveTimestamps: true,
        });
      }
      symlinkSync(join(repositoryRoot, 'node_modules'), join(copy, 'node_modules'));
      const build = async (): Promise<string> => {
        const child = ChildRun.node(
          'build --changed',
          ['scripts/build.js', '--changed'],
          process.env,
          copy,
        );
        assert.equal(await child.waitForExit(), 0, child.output());
        return child.stdout();
      };

      await build();
      const unchanged = await build();
      assert.match(unchanged, /^build: server unchanged since its last build$/m);
      assert.match(unchanged, /^build: web unchanged since its last build$/m);

      const mark = randomUUID();
      // A statement with an effect: the one file keeps only what runs. Its string, and the
      // comment of a class's method (a comment the one file keeps), have characters beyond
      // Latin-1.
      appendFileSync(
        join(copy, 'src/version.ts'),
        `(globalThis as Record<string, unknown>).buildMark = new (class {
          /** Marked \u2026 by the build\u2019s test. */
          mark(): string {
            return '${mark} \u2192';
          }
        })().mark();\n`,
      );
      const server = await build();
      assert.doesNotMatch(server, /server unchanged/);
      assert.match(server, /^build: web unchanged/m);
      assert.match(readFileSync(join(copy, 'dist/version.js'), 'utf8'), new RegExp(mark));
      // What npm start runs, the one file, is joined again, with nothing beyond Latin-1 in it
      // (V8 would hold its whole text at two bytes a character): the string is escaped, the
      // comment's characters replaced.
      const bundle = readFileSync(join(copy, 'dist/agentry.js'), 'utf8');
      assert.ok(bundle.includes(`return "${mark} \\u2192";`), 'the string, escaped');
      assert.ok(bundle.includes('Marked ? by the build?s test.'), 'the comment, kept');
      assert.doesNotMatch(bundle, /[^\0-\xff]/);

      const later = new Date();
      utimesSync(join(copy, 'web/index.html'), later, later);
      const web = await build();
      assert.match(web, /^build: server unchanged/m);
      assert.doesNotMatch(web, /web unchanged/);
      assert.ok(existsSync(join(copy, 'dist/web/index.html')));

      const again = await build();
      assert.match(again, /^build: server unchanged/m);
      assert.match(again, /^build: web unchanged/m);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});
