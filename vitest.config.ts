import { defineConfig } from 'vitest/config';

/**
 * Files that assert a latency or a deadline (a request within N ms, a state reached within 2 s, a
 * number of cases within a time budget, work done within a window): they run after every other
 * file, one at a time, so that what they measure never depends on what else the cores are doing.
 */
const TIMED = [
  'test/e2e/webhooks-replicas.test.ts',
  'test/fake-upstream/faults.test.ts',
  'test/integration/graphql-cache.test.ts', // one upstream POST for 200 queries across 2 replicas: a Redis lock with a deadline
  'test/integration/graphql-dashboard.test.ts', // each change shown within 1 s, under 333 requests a second
  'test/integration/graphql-refresh-ahead.test.ts', // a refresh goes upstream before a 4 s lifetime ends
  'test/integration/cli-defaults-and-logs.test.ts',
  'test/integration/fair-share.test.ts',
  'test/integration/redis-budget-rejoin.test.ts',
  'test/integration/redis-event-loop-stall.test.ts',
  'test/integration/redis-l2.test.ts',
  'test/integration/refresh-ahead.test.ts', // a refresh goes upstream before a 2 s lifetime ends
  'test/integration/refresh-ahead-replicas.test.ts', // one refresh per 2 s lifetime across replicas (a Redis lock with a deadline)
  'test/integration/replicas.test.ts', // one upstream request for 300 across 3 replicas: a Redis lock with a deadline
  'test/integration/shared-budget.test.ts',
  'test/integration/tracing.test.ts', // shutdown with the collector down is bounded in time
  'test/integration/token-pool.test.ts', // 149 requests spent within the fake's 5 s window
  'test/integration/webhook-slow-senders.test.ts',
  'test/hardening/decoded-bomb.test.ts',
  'test/hardening/fuzz.test.ts',
  // No latency asserted, but its sequences (10,000 in `npm run soak`) within a 180 s timeout: it needs the core to itself.
  'test/hardening/isolation-scale.test.ts',
  'test/hardening/redis-faults.test.ts',
  'test/hardening/shutdown.test.ts',
  'test/hardening/upstream-faults.test.ts',
];

/** What every project runs with. The global setups below stay at the root, where they run once per run. */
const common = {
  testTimeout: 20_000,
  hookTimeout: 30_000,
  pool: 'forks' as const,
  setupFiles: ['test/helpers/capture-setup.ts'],
};

export default defineConfig({
  test: {
    reporters: ['default'],
    // The tests spawn the built CLI: dist/ is brought up to date first (an incremental tsc).
    // The secrets scan: captures of every proxy's logs, metrics, admin and error answers during
    // the run, scanned for token values once every test has run (a hit fails the run).
    globalSetup: ['test/helpers/build-dist.ts', 'test/helpers/secrets-scan.ts'],
    projects: [
      {
        // Processes, sockets, Redis: mostly waiting, so more files than cores run at once.
        test: {
          ...common,
          name: 'integration',
          include: ['test/{integration,e2e,clients,fake-upstream,hardening}/**/*.test.ts'],
          exclude: TIMED,
          maxWorkers: 3,
        },
      },
      {
        // In-process units: one module graph per worker instead of one per file.
        test: { ...common, name: 'unit', include: ['test/unit/**/*.test.ts'], isolate: false, maxWorkers: 3 },
      },
      {
        test: { ...common, name: 'timed', include: TIMED, maxWorkers: 1, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
