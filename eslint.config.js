// ESLint (flat config): the recommended rules of ESLint and typescript-eslint. `npm run lint`
// runs it, and .ci/run. Where a rule is relaxed, the reason is next to it.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const nodeGlobals = Object.fromEntries(
  ['process', 'console', 'Buffer', 'URL', 'performance', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'NodeJS'].map((g) => [g, 'readonly']),
);

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.cache/', 'src/spark/proto/gen/', 'schemas/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // Older files carry disable comments for rules this config already relaxes.
    linterOptions: { reportUnusedDisableDirectives: 'off' },
    languageOptions: { globals: nodeGlobals },
    rules: {
      // A validated config is typed by its template's zod schema; `any` marks that one boundary
      // (Record<string, any>) and the benchmark's untyped JSON.
      '@typescript-eslint/no-explicit-any': 'off',
      // `_name` is how the code says "deliberately unused" (a destructured field left out).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_' }],
    },
  },
  {
    // The HOCON reader matches control characters on purpose (the spec's whitespace and refusals),
    // and its tokenizer loop advances with a comma expression.
    files: ['src/core/config/hocon.ts'],
    rules: { 'no-control-regex': 'off', '@typescript-eslint/no-unused-expressions': 'off' },
  },
  {
    // Fake gRPC handlers are generators that may answer without yielding; a test's own failure
    // message is the point, not the caught error's.
    files: ['test/**/*.ts'],
    rules: { 'require-yield': 'off', 'preserve-caught-error': 'off' },
  },
);
