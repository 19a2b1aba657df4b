/**
 * Fair share across replicas (with Redis): per-consumer spend counters in Redis
 * hold the shares whichever replica a consumer's requests reach; the counters expire with their
 * window; a Redis outage falls back to a counted local 1/N allowance, and Redis takes over again.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { Redis } from 'ioredis';
import { parseConfig } from '../../src/platform/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { createMetrics } from '../../src/platform/metrics/registry.js';
import { createRedisConnection, type RedisConnection } from '../../src/platform/redis/connection.js';
import { createConsumerBudget, type Admission, type ConsumerBudget } from '../../src/pool/consumers/consumer-budget.js';
import { awayFromHourEdge, HOUR_EDGE_WAIT_MS } from '../helpers/clock.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

const TOKENS = { a: 'pool_secret_token_fairr_aaaa1111', b: 'pool_secret_token_fairr_bbbb2222' };
const FAKE_TOKENS = parseTokenSpec(`${TOKENS.a}@alice:public_repo,${TOKENS.b}@bob:public_repo`);
const KEYS = { greedy: 'consumer_key_greedy_r_7c1e0a', polite: 'consumer_key_polite_r_93bd44' };
const logger = createLogger({ level: 'silent' });

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const res = await request(url, { headers });
  return { status: res.statusCode, body: await res.body.text() };
}

describe('fair share across replicas through Redis', () => {
  const proxies: TestProxy[] = [];
  let fake: FakeUpstream | undefined;
  afterEach(async () => {
    for (const proxy of proxies.splice(0)) {
      const text = (await get(`${proxy.adminUrl}/admin/consumers`)).body + proxy.logText();
      await proxy.close();
      for (const secret of [...Object.values(TOKENS), ...Object.values(KEYS)]) expect(text).not.toContain(secret);
    }
    await fake?.close();
  });

  it(
    'a greedy consumer spread over two replicas still leaves the other its reserve',
    async () => {
      await awayFromHourEdge();
      fake = await startFakeUpstream({ tokens: FAKE_TOKENS, tokenLimit: 50 });
      const prefix = `fair-${Date.now()}:`;
      for (let i = 0; i < 2; i++) {
        proxies.push(
          await startTestProxy({
            upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
            redis: { url: redis.url, key_prefix: prefix },
            pool: {
              tokens: [
                { name: 'a', value: TOKENS.a },
                { name: 'b', value: TOKENS.b },
              ],
            },
            consumers: {
              enabled: true,
              keys: [
                { name: 'greedy', value: KEYS.greedy },
                { name: 'polite', value: KEYS.polite },
              ],
            },
          }),
        );
      }
      const [one, two] = proxies as [TestProxy, TestProxy];
      const greedy: number[] = [];
      for (let i = 0; i < 100; i += 10) {
        const batch = Array.from({ length: 10 }, (_, slot) =>
          get(`${(slot % 2 === 0 ? one : two).url}/repos/etagere-org/repo-001?spread=${i + slot}`, { 'x-etagere-key': KEYS.greedy }),
        );
        greedy.push(...(await Promise.all(batch)).map((a) => a.status));
      }
      const served = greedy.filter((status) => status === 200).length;
      expect(served).toBeGreaterThanOrEqual(50);
      expect(served).toBeLessThanOrEqual(75);
      const polite: number[] = [];
      for (let i = 0; i < 25; i++)
        polite.push(
          (await get(`${(i % 2 === 0 ? one : two).url}/repos/etagere-org/repo-002?n=${i}`, { 'x-etagere-key': KEYS.polite })).status,
        );
      expect(polite).toEqual(Array.from({ length: 25 }, () => 200));
      const report = JSON.parse((await get(`${one.adminUrl}/admin/consumers`)).body) as { budget: string };
      expect(report.budget).toBe('shared');

      // The counters are named by consumer (never by key) and expire at the end of their window.
      const client = new Redis(redis.url);
      try {
        const keys = await client.keys(`${prefix}*{consumers}*`);
        expect(keys.length).toBeGreaterThan(0);
        for (const key of keys) {
          expect(key).toMatch(/\{consumers\}:(core:\d+|hour:\d+):(greedy|polite)$/);
          const ttl = await client.pttl(key);
          expect(ttl).toBeGreaterThan(0);
          expect(ttl).toBeLessThanOrEqual(3_600_000 + 60_000);
        }
      } finally {
        client.disconnect();
      }
    },
    60_000 + HOUR_EDGE_WAIT_MS,
  );
});

describe('consumer budget: the Redis outage fallback (1/N)', () => {
  const conns: RedisConnection[] = [];
  const budgets: ConsumerBudget[] = [];
  afterEach(async () => {
    for (const budget of budgets.splice(0)) budget.close();
    for (const conn of conns.splice(0)) await conn.close();
  });

  async function replica(prefix: string, now: () => number): Promise<ConsumerBudget> {
    const cfg = parseConfig({ upstreams: [{ name: 'gh', prefix: '/', url: 'http://x' }], redis: { url: redis.url, key_prefix: prefix } });
    const conn = createRedisConnection(cfg.redis, logger, createMetrics({ defaultMetrics: false }))!;
    conns.push(conn);
    await until(() => conn.up(), 5_000, 'redis connection');
    const budget = createConsumerBudget({
      consumers: [
        { name: 'a', weight: 1, maxPerHour: null, maxConcurrency: null },
        { name: 'b', weight: 1, maxPerHour: null, maxConcurrency: null },
      ],
      reserveFraction: 0.5,
      queueTimeoutMs: 1_000,
      maxQueue: 100,
      figures: () => ({ limit: 100, remaining: 100, reset: Math.floor(now() / 1000) + 3_000 }),
      replicas: () => 2,
      redis: conn,
      logger,
      now,
    });
    budgets.push(budget);
    return budget;
  }

  const spend = async (budget: ConsumerBudget, consumer: string, count: number): Promise<Admission[]> => {
    const out: Admission[] = [];
    for (let i = 0; i < count; i++) {
      const admission = await budget.admit(consumer, 'core');
      if (admission.kind === 'admitted') admission.settle({ upstreamRequests: 1, spent: true });
      out.push(admission);
    }
    return out;
  };

  it(
    'what went upstream counts on every replica: a 304 keeps its unit, each retry adds one, nothing sent gives it back',
    async () => {
      await awayFromHourEdge();
      const now = (): number => Math.floor(Date.now() / 3_600_000) * 3_600_000 + 1_800_000;
      const prefix = `fair-units-${Date.now()}:`;
      const one = await replica(prefix, now);
      const two = await replica(prefix, now);
      const settle = async (budget: ConsumerBudget, upstreamRequests: number, spent: boolean): Promise<void> => {
        const admission = await budget.admit('a', 'core');
        if (admission.kind !== 'admitted') throw new Error('expected an admission');
        admission.settle({ upstreamRequests, spent });
      };
      await settle(one, 1, false); // a forced revalidation answered 304
      await settle(one, 3, true); // a 200 after two tokens refused it
      await settle(one, 0, false); // no token: nothing went upstream
      const client = new Redis(redis.url);
      try {
        const hour = Math.floor(now() / 3_600_000);
        const keyOf = async (pattern: string): Promise<string> => (await client.keys(`${prefix}*{consumers}:${pattern}`))[0] ?? '';
        await until(async () => Number(await client.get(await keyOf(`hour:${hour}:a`))) === 4, 5_000, 'the units in Redis');
        const hourKey = await keyOf(`hour:${hour}:a`);
        const windowKey = await keyOf(`core:${hour}:a`);
        expect(Number(await client.get(windowKey))).toBe(4);
        for (const key of [hourKey, windowKey]) expect(await client.pttl(key)).toBeGreaterThan(0);
      } finally {
        client.disconnect();
      }
      // The other replica counts them in a's share: 75 may be borrowed in all (share 50, b's reserve 25).
      expect((await spend(two, 'a', 80)).filter((admission) => admission.kind === 'admitted')).toHaveLength(71);
    },
    20_000 + HOUR_EDGE_WAIT_MS,
  );

  it.skipIf(process.env.REDIS_URL !== undefined)(
    'shares hold across replicas; without Redis each replica spends 1/N; then Redis takes over again',
    async () => {
      await awayFromHourEdge();
      // Mid-hour on a fixed clock: the window cannot move during the test.
      const now = (): number => Math.floor(Date.now() / 3_600_000) * 3_600_000 + 1_800_000;
      const prefix = `fair-fallback-${Date.now()}:`;
      const one = await replica(prefix, now);
      const two = await replica(prefix, now);
      // 40 units through one replica, then the other sees them: a may borrow to 75 in all.
      expect((await spend(one, 'a', 40)).every((a) => a.kind === 'admitted')).toBe(true);
      const more = await spend(two, 'a', 40);
      expect(more.filter((a) => a.kind === 'admitted')).toHaveLength(35);
      expect(more.at(-1)).toMatchObject({ kind: 'refused', reason: 'share', retryAfterSeconds: 1800 });
      expect(one.report().budget).toBe('shared');

      // Redis goes away: each replica counts alone, with 1/2 of the quota, from the shared counts it saw last.
      if (redis.kind !== 'process') return;
      redis.signal('SIGKILL');
      // One saw a at 40 (half: 20 of its 50), two saw 75 (37.5): a may borrow on one, never past b's reserve (12.5 a replica).
      const onOne = await spend(one, 'a', 40);
      const onTwo = await spend(two, 'a', 40);
      expect(one.report().budget).toBe('fallback');
      expect(two.report().budget).toBe('fallback');
      expect(onOne.filter((a) => a.kind === 'admitted')).toHaveLength(17); // 50 - 20 - 12.5, rounded down
      expect(onTwo.filter((a) => a.kind === 'admitted')).toHaveLength(0);
      // b still finds its reserve on each replica.
      for (const budget of [one, two]) expect((await spend(budget, 'b', 12)).every((a) => a.kind === 'admitted')).toBe(true);

      // Redis back (empty: nothing persisted): the shared counters take over again.
      await redis.restart();
      await until(
        async () => (await one.admit('b', 'core')).kind === 'admitted' && one.report().budget === 'shared',
        10_000,
        'Redis again',
      );
    },
    30_000 + HOUR_EDGE_WAIT_MS,
  );
});
