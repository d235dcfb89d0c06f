import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** The composition root and the command line, above every layer. */
const ROOT = ['cli/**', 'context.js', 'app.js', 'server.js'];
/** The root but context.ts, whose `AppContext` type the routes take. */
const ROOT_BUT_CONTEXT = ROOT.filter((path) => path !== 'context.js');
const LAYERS = 'see "Layers" in docs/architecture.md';

/**
 * `src/<folder>` may import neither the folders named in `above` nor the root (or the part of it
 * named in `root`); `what` says so in the message. Imports are relative paths, so a folder is
 * recognised by its name at any depth of the path imported.
 */
function layerRule(folder, above, root = ROOT, what = 'nothing above it') {
  const message = `src/${folder} imports ${what}: ${LAYERS}`;
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

/**
 * `src/<folder>` (a folder without subfolders) imports nothing of the project outside itself
 * but the root modules named in `allowed`: a library of its own.
 */
function selfContainedRule(folder, allowed = []) {
  const but = allowed.length === 0 ? '' : ` but ${allowed.join(', ')}`;
  return {
    files: [`src/${folder}/**`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['../*', ...allowed.map((module) => `!../${module}`)],
              message: `src/${folder} imports nothing of the project outside it${but}: ${LAYERS}`,
            },
          ],
        },
      ],
    },
  };
}

/**
 * `src/views/` turns what services return into wire shapes: it runs nothing of the layers above
 * wire/ and crypto/, and takes from store/ and services/ only the types of the rows and results
 * it is given.
 */
function viewsRule() {
  const message = `src/views imports nothing of the layers above wire/ and crypto/ but types from store/ and services/: ${LAYERS}`;
  return {
    files: ['src/views/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/store/**', '**/services/**'], allowTypeImports: true, message },
            {
              group: ['infra/**', 'auth/**', 'config/**', 'runner/**', 'http/**', ...ROOT].map(
                (path) => `**/${path}`,
              ),
              message,
            },
          ],
        },
      ],
    },
  };
}

/**
 * `src/cli/` works through the services (the admin context): of the store it calls only the
 * database's administration (database.ts: checks and files; backup.ts), takes the types of the
 * rows services answer, and writes no query.
 */
function cliRule() {
  const message = `src/cli calls services, not repositories or queries: ${LAYERS}`;
  return {
    files: ['src/cli/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: [{ name: 'kysely', message }],
          patterns: [
            {
              group: ['**/store/**', '!**/store/database.js', '!**/store/backup.js'],
              allowTypeImports: true,
              message,
            },
          ],
        },
      ],
    },
  };
}

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'data/', 'coverage/', 'bench/results/', '.venv/'] },
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
  {
    // Plain Node scripts (the build): Node's globals.
    files: ['scripts/**/*.js'],
    languageOptions: { globals: { console: 'readonly', process: 'readonly', URL: 'readonly' } },
  },
  {
    // The bench's probe, loaded into the server by Node itself: Node's globals.
    files: ['bench/**/*.mjs'],
    languageOptions: {
      globals: { performance: 'readonly', process: 'readonly', setInterval: 'readonly' },
    },
  },
  // The layers (docs/architecture.md): a folder imports nothing from the layers above it.
  selfContainedRule('crypto'),
  selfContainedRule('config', ['errors.js']),
  layerRule('wire', ['auth', 'store', 'infra', 'views', 'services', 'runner', 'http']),
  layerRule('auth', ['store', 'views', 'services', 'runner', 'http']),
  layerRule('store', ['views', 'services', 'runner', 'http']),
  layerRule('infra', ['views', 'services', 'runner', 'http']),
  viewsRule(),
  layerRule('services', ['runner', 'http']),
  // The runner and http stand side by side and import nothing of each other.
  layerRule('runner', ['http'], ROOT, 'nothing of http or the root'),
  layerRule(
    'http',
    ['runner'],
    ROOT_BUT_CONTEXT,
    'nothing of the runner or the root but AppContext',
  ),
  cliRule(),
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      // Tests read JSON answers whose shape each assertion checks.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
