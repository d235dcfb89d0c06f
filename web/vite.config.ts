import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { defineConfig, type Plugin } from 'vite';
import type { OutputChunk } from 'rollup';

/** JavaScript the pages load at once, gzipped, all entries together. */
const JS_BUDGET_BYTES = 100 * 1024;
/**
 * JavaScript one page may fetch later, gzipped, per chunk loaded on demand (the hosted agents'
 * code editor): it costs only the page that asks for it.
 */
const LAZY_JS_BUDGET_BYTES = 150 * 1024;

/**
 * Fails the build when the JavaScript shipped to browsers outgrows its budget: the entries
 * with everything they import statically on one side, each chunk imported dynamically (and
 * what it alone needs) on the other.
 */
function scriptBudget(): Plugin {
  return {
    name: 'agentry-script-budget',
    apply: 'build',
    generateBundle(_options, bundle) {
      const chunks = new Map<string, OutputChunk>();
      for (const file of Object.values(bundle)) {
        if (file.type === 'chunk') chunks.set(file.fileName, file);
      }
      // What the pages load at once: the entries and, transitively, their static imports.
      const eager = new Set<string>();
      const visit = (name: string): void => {
        if (eager.has(name)) return;
        eager.add(name);
        for (const imported of chunks.get(name)?.imports ?? []) visit(imported);
      };
      for (const chunk of chunks.values()) if (chunk.isEntry) visit(chunk.fileName);
      const size = (chunk: OutputChunk) => ({
        bytes: Buffer.byteLength(chunk.code),
        gzipBytes: gzipSync(chunk.code, { level: 9 }).length,
      });
      let raw = 0;
      let gzipped = 0;
      const lazy: Record<string, { bytes: number; gzipBytes: number }> = {};
      for (const chunk of chunks.values()) {
        const measured = size(chunk);
        if (eager.has(chunk.fileName)) {
          raw += measured.bytes;
          gzipped += measured.gzipBytes;
        } else {
          lazy[chunk.fileName] = measured;
        }
      }
      const kib = (n: number) => (n / 1024).toFixed(1);
      const line = `web: ${kib(gzipped)} KiB of JavaScript gzipped (${kib(raw)} KiB raw), budget ${JS_BUDGET_BYTES / 1024} KiB`;
      if (gzipped > JS_BUDGET_BYTES) this.error(`${line}: over budget`);
      console.log(line);
      for (const [fileName, measured] of Object.entries(lazy)) {
        const lazyLine = `web: ${fileName} loaded on demand, ${kib(measured.gzipBytes)} KiB gzipped, budget ${LAZY_JS_BUDGET_BYTES / 1024} KiB`;
        if (measured.gzipBytes > LAZY_JS_BUDGET_BYTES) this.error(`${lazyLine}: over budget`);
        console.log(lazyLine);
      }
      this.emitFile({
        type: 'asset',
        fileName: 'size.json',
        source: JSON.stringify({
          jsBytes: raw,
          jsGzipBytes: gzipped,
          budget: JS_BUDGET_BYTES,
          lazy,
          lazyBudget: LAZY_JS_BUDGET_BYTES,
        }),
      });
    },
  };
}

const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: '/',
  logLevel: 'warn',
  publicDir: false,
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  plugins: [scriptBudget()],
  build: {
    outDir: fileURLToPath(new URL('../dist/web', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // The polyfill would be an inline script, which the pages' CSP forbids.
    modulePreload: { polyfill: false },
    rollupOptions: {
      input: {
        console: fileURLToPath(new URL('index.html', import.meta.url)),
        inspect: fileURLToPath(new URL('inspect/index.html', import.meta.url)),
      },
    },
  },
});
