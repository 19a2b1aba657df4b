/**
 * The dashboard goal of bench/answers.ts in short (5 simulated minutes of 3 s): 20 GraphQL queries,
 * each asked by 50 clients a minute through two replicas sharing Redis, against the fake enforcing
 * GraphQL points, an issue opened on a queried repository every half minute. Every call costs at
 * least a point without the cache, so the reads are a floor of the uncached spend: the cache spends
 * at least 20 times fewer; a read that starts after an issue was opened shows it within 1 s; no
 * answer with `errors` ever comes from the cache. `npm run bench:quota -- --answers` runs it for 5
 * real minutes, against a real uncached baseline.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dashboardRun } from '../../bench/answers.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

describe('a GraphQL dashboard through two replicas (short)', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('spends >= 20x fewer points, shows each change within 1 s, never serves an answer with errors from the cache', async () => {
    const run = await dashboardRun({ minutes: 5, minuteMs: 3_000 }, true, redis.url);
    expect(run.failures).toBe(0);
    expect(run.reads).toBe(5_000);
    expect(run.reads / run.points).toBeGreaterThanOrEqual(20);
    expect(run.changes).toBeGreaterThanOrEqual(8);
    expect(run.maxStaleMs).toBeLessThanOrEqual(1_000);
    expect(run.errorAnswers).toBeGreaterThan(0); // the repository created after the first minute: NOT_FOUND until then
    expect(run.errorsFromCache).toBe(0);
  }, 60_000);
});
