/**
 * ESLint configuration (flat config, loaded through jiti): `npm run lint` runs it with Prettier's check.
 *
 * ESLint's and typescript-eslint's recommended rules, without type-aware rules so that a lint of the
 * whole tree stays fast, plus the local rule `local/no-short-names` (eslint/rules/no-short-names.ts),
 * the floors of src/ and no import cycle (eslint/floors.ts; test/unit/import-rules.test.ts plants
 * violations to see them fire).
 * Formatting is Prettier's job (.prettierrc.json); no rule here is about layout.
 */
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import tseslint from 'typescript-eslint';
import { importX } from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import noShortNames from './eslint/rules/no-short-names.ts';
import { cycleRules, floorRules } from './eslint/floors.ts';

export default defineConfig(
  globalIgnores(['dist/', 'coverage/', 'bench/results/']),
  {
    files: ['**/*.ts'],
    extends: [js.configs.recommended, tseslint.configs.recommended],
    plugins: { local: { rules: { 'no-short-names': noShortNames } } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      'local/no-short-names': 'error',
      // Control bytes in a character class are how this code rejects them (request targets, log escaping).
      'no-control-regex': 'off',
      // `_`-prefixed names are deliberately unused (a parameter kept for its position, a rest sibling).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },
  {
    // No module imports itself back through others, anywhere in the tree. The import-x settings make
    // its module map read TypeScript: without them it skips every .ts file it reaches, and finds no cycle.
    files: ['**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: fileURLToPath(new URL('tsconfig.json', import.meta.url)) })],
      'import-x/extensions': ['.ts'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
    },
    rules: cycleRules,
  },
  {
    // Imports run only downward in src/, and the products import no test, bench or script (eslint/floors.ts).
    files: ['src/**/*.ts', 'fake-github/**/*.ts'],
    rules: floorRules,
  },
  {
    // Size limits of the code a newcomer reads (docs/architecture.md): no function over 120 lines ...
    files: ['src/**/*.ts', 'fake-github/**/*.ts'],
    ignores: ['fake-github/data.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 120, skipBlankLines: false, skipComments: false }] },
  },
  {
    // ... and no file on the request path over 350.
    files: ['src/paths/**/*.ts', 'src/http/**/*.ts', 'src/cache/**/*.ts', 'src/main/handler.ts'],
    ignores: ['src/http/github-routes.ts'], // data, generated (npm run routes:generate)
    rules: { 'max-lines': ['error', { max: 350, skipBlankLines: false, skipComments: false }] },
  },
);
