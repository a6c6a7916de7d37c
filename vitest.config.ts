import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          // The hostile corpus' validate tier needs no Spark: it runs with the unit tests.
          include: ['test/unit/**/*.test.ts', 'test/security/hostile-configs.test.ts'],
          testTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/security/**/*.test.ts'],
          exclude: ['test/security/hostile-configs.test.ts'],
          // One real Spark Connect server on a 2-core machine: test files run one at a time.
          fileParallelism: false,
          testTimeout: 300_000,
          hookTimeout: 600_000,
          globalSetup: ['test/integration/global-setup.ts'],
          // A file without a needs(...) call gets the default stack (test/support/needs.ts).
          setupFiles: ['test/support/needs-default.ts'],
        },
      },
    ],
  },
});
