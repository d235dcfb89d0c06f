import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** The composition root and the command line, above every layer. */
const ROOT = ['cli/**', 'context.js', 'app.js', 'server.js'];

/**
 * `src/<folder>` may import neither the folders named in `above` nor the root. Imports are
 * relative paths, so a folder is recognised by its name at any depth of the path imported.
 */
function layerRule(folder, above) {
  const message = `src/${folder} imports nothing above it: see "Layers" in docs/architecture.md`;
  return {
    files: [`src/${folder}/**`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [...above.map((name) => `${name}/**`), ...ROOT].map((path) => ({
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
  layerRule('wire', ['store', 'infra', 'services', 'http']),
  layerRule('store', ['services', 'http']),
  layerRule('infra', ['services', 'http']),
  layerRule('services', ['http']),
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      // Tests read JSON answers whose shape each assertion checks.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
