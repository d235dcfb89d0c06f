import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** The composition root and the command line, above every layer. */
const ROOT = ['cli/**', 'context.js', 'app.js', 'server.js'];
const VIEWS_MESSAGE =
  'src/views imports nothing of the layers above wire/ and crypto/ but types from store/ and services/: see "Layers" in docs/architecture.md';
const ROOT_BUT_CONTEXT = ROOT.filter((path) => path !== 'context.js');

/**
 * `src/<folder>` may import neither the folders named in `above` nor the root (or the part of it
 * named in `root`); `what` says so in the message. Imports are relative paths, so a folder is
 * recognised by its name at any depth of the path imported.
 */
function layerRule(folder, above, root = ROOT, what = 'nothing above it') {
  const message = `src/${folder} imports ${what}: see "Layers" in docs/architecture.md`;
  return {
    files: [`src/${folder}/**`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [...above.map((name) => `${name}/**`), ...root].map((path) => ({
            group: [`**/${path}`],
            message,
          })),
        },
      ],
    },
  };
}

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'data/', 'coverage/', 'bench/results/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
    },
  },
  // The layers (docs/architecture.md): a folder imports nothing from the layers above it.
  layerRule('wire', ['store', 'infra', 'views', 'services', 'runner', 'http']),
  layerRule('store', ['views', 'services', 'runner', 'http']),
  layerRule('infra', ['views', 'services', 'runner', 'http']),
  // Views turn what services return into wire shapes: they run nothing of the layers above
  // wire/ and crypto/, and read the rows and the services' results they are given as types.
  {
    files: ['src/views/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/store/**', '**/services/**'],
              allowTypeImports: true,
              message: VIEWS_MESSAGE,
            },
            {
              group: ['infra/**', 'auth/**', 'config/**', 'runner/**', 'http/**', ...ROOT].map(
                (path) => `**/${path}`,
              ),
              message: VIEWS_MESSAGE,
            },
          ],
        },
      ],
    },
  },
  layerRule('services', ['runner', 'http']),
  layerRule('runner', ['http'], ROOT, 'nothing of http or the root'),
  // The runner and http stand side by side and import nothing of each other; routes take the
  // `AppContext` type from context.ts.
  layerRule(
    'http',
    ['runner'],
    ROOT_BUT_CONTEXT,
    'nothing of the runner or the root but AppContext',
  ),
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      // Tests read JSON answers whose shape each assertion checks.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
