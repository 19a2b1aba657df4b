import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    pool: 'forks',
    reporters: ['default'],
    // The tests spawn the built CLI: dist/ is brought up to date first (an incremental tsc).
    // The secrets scan: captures of every proxy's logs, metrics, admin and error answers during
    // the run, scanned for token values once every test has run (a hit fails the run).
    globalSetup: ['test/helpers/build-dist.ts', 'test/helpers/secrets-scan.ts'],
    setupFiles: ['test/helpers/capture-setup.ts'],
  },
});
