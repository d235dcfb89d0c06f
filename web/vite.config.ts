import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { defineConfig, type Plugin } from 'vite';

/** JavaScript the pages may ship, gzipped, all entries together. */
const JS_BUDGET_BYTES = 100 * 1024;

/** Fails the build when the JavaScript shipped to browsers outgrows its budget. */
function scriptBudget(): Plugin {
  return {
    name: 'agentry-script-budget',
    apply: 'build',
    generateBundle(_options, bundle) {
      let raw = 0;
      let gzipped = 0;
      for (const file of Object.values(bundle)) {
        if (file.type !== 'chunk') continue;
        raw += Buffer.byteLength(file.code);
        gzipped += gzipSync(file.code, { level: 9 }).length;
      }
      const line = `web: ${(gzipped / 1024).toFixed(1)} KiB of JavaScript gzipped (${(raw / 1024).toFixed(1)} KiB raw), budget ${JS_BUDGET_BYTES / 1024} KiB`;
      if (gzipped > JS_BUDGET_BYTES) this.error(`${line}: over budget`);
      console.log(line);
      this.emitFile({
        type: 'asset',
        fileName: 'size.json',
        source: JSON.stringify({ jsBytes: raw, jsGzipBytes: gzipped, budget: JS_BUDGET_BYTES }),
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
