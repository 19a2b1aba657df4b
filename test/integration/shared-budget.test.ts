/**
 * The shared token budget's Lua scripts against a real Redis: replicas racing for the last
 * units never hand out more than remain, a crashed replica's reservations expire, what one
 * replica learns (a confirmed 401, exhaustion) reaches the others, and an outage falls back to 1/N.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createLogger } from '../../src/platform/log/logger.js';
import { createMetrics } from '../../src/platform/metrics/registry.js';
import { createRedisConnection, type RedisConnection } from '../../src/platform/redis/connection.js';
import { createTokenPool } from '../../src/pool/backends/local-pool.js';
import { createSharedTokenPool, type SharedTokenPool } from '../../src/pool/backends/shared-pool.js';
import type { Acquired } from '../../src/pool/rules/types.js';
import { parseConfig } from '../../src/platform/config/load.js';
import { until } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

const logger = createLogger({ level: 'silent' });
const nowSeconds = Math.floor(Date.now() / 1000);
const rl =
  (remaining: number, limit = 50, reset = nowSeconds + 600) =>
  (name: string) =>
    ({ 'x-ratelimit-limit': String(limit), 'x-ratelimit-remaining': String(remaining), 'x-ratelimit-reset': String(reset) })[name];

describe('shared token budget (Lua scripts on a real Redis)', () => {
  let redis: TestRedis;
  const conns: RedisConnection[] = [];
  const pools: SharedTokenPool[] = [];
  let prefixN = 0;

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    for (const pool of pools) pool.close();
    for (const conn of conns) await conn.close();
    await redis?.stop();
  });

  async function replicas(
    count: number,
    tokens = ['a'],
    reservationMs?: number,
    points?: { rest: number; graphql: number },
  ): Promise<SharedTokenPool[]> {
    const prefix = `budget-test-${++prefixN}:`;
    const out: SharedTokenPool[] = [];
    for (let i = 0; i < count; i++) {
      const cfg = parseConfig({ upstreams: [{ name: 'gh', prefix: '/', url: 'http://x' }], redis: { url: redis.url, key_prefix: prefix } });
      const conn = createRedisConnection(cfg.redis, logger, createMetrics({ defaultMetrics: false }))!;
      conns.push(conn);
      await until(() => conn.up(), 5_000, 'redis connection');
      const local = createTokenPool({
        tokens: tokens.map((name) => ({ name, value: `v-${name}` })),
        equivalent: true,
        perTokenConcurrency: 100,
        maxConcurrency: 1000,
        queueTimeoutMs: 200,
        maxQueue: 1000,
        points,
      });
      const pool = createSharedTokenPool(
        local,
        conn,
        { perTokenConcurrency: 100, maxConcurrency: 1000, queueTimeoutMs: 200, reservationMs, points },
        logger,
      );
      pools.push(pool);
      out.push(pool);
    }
    return out;
  }

  /** Acquires and gives the lease back at once: what the replica answers now. */
  async function probe(replica: SharedTokenPool): Promise<Acquired['kind']> {
    const acquired = await replica.acquire();
    if (acquired.kind === 'lease') acquired.lease.cancel();
    return acquired.kind;
  }

  /** Until the replica's first token shows `remaining` (it has learned its numbers). */
  const knows = (replica: SharedTokenPool, remaining: number): Promise<void> =>
    until(
      async () => {
        await probe(replica);
        return replica.snapshot()[0]!.remaining === remaining;
      },
      2_000,
      'a to know its numbers',
    );

  it('replicas racing for the last units never hand out more than remain', async () => {
    const [replicaA, replicaB, replicaC] = await replicas(3);
    replicaA!.learn('a', 200, { limit: 50, remaining: 10, reset: nowSeconds + 600, resource: 'core' });
    await until(
      async () => {
        await replicaB!.acquire().then((r) => r.kind === 'lease' && r.lease.cancel());
        return replicaB!.snapshot()[0]!.remaining === 10;
      },
      2_000,
      'the numbers to reach the other replicas',
    );
    const results: Acquired[] = await Promise.all(Array.from({ length: 60 }, (_, i) => [replicaA, replicaB, replicaC][i % 3]!.acquire()));
    const leases = results.filter((r) => r.kind === 'lease');
    expect(leases).toHaveLength(10);
    expect(results.filter((r) => r.kind === 'unavailable').length).toBe(50);
    // Every lease spends its unit: the shared remaining reaches 0 and nobody gets more.
    let left = 10;
    for (const acquired of leases) if (acquired.kind === 'lease') acquired.lease.settle(200, rl(--left), undefined);
    await until(async () => (await replicaC!.acquire()).kind === 'unavailable', 2_000, 'the pool to be spent');
  });

  it("replicas share each token's secondary-limit points: together they send no more than a 10 s window holds", async () => {
    const all = await replicas(3, ['a', 'b'], undefined, { rest: 60, graphql: 60 }); // 11 points a token in any 10 s
    for (const replica of all)
      for (const name of ['a', 'b']) replica.learn(name, 200, { limit: 5000, remaining: 4000, reset: nowSeconds + 600, resource: 'core' });
    const results: Acquired[] = await Promise.all(Array.from({ length: 60 }, (_, i) => all[i % 3]!.acquire()));
    const leases = results.flatMap((r) => (r.kind === 'lease' ? [r.lease] : []));
    expect(leases.filter((lease) => lease.name === 'a')).toHaveLength(11);
    expect(leases.filter((lease) => lease.name === 'b')).toHaveLength(11);
    // The others are told when the points come back: a 429 with Retry-After, not a 503.
    for (const refused of results.filter((r) => r.kind === 'unavailable')) expect(refused).toMatchObject({ reason: 'paced' });
    for (const lease of leases) lease.settle(200, rl(3000, 5000), undefined);
    expect((await all[1]!.acquire({ resource: 'graphql' })).kind).toBe('lease'); // GraphQL's points are apart
  });

  it('a replica that dies mid-request frees its units when the reservation expires', async () => {
    const [replicaA, replicaB] = await replicas(2, ['a'], 300);
    replicaA!.learn('a', 200, { limit: 50, remaining: 1, reset: nowSeconds + 600, resource: 'core' });
    const held = await replicaA!.acquire();
    expect(held.kind).toBe('lease'); // never settled: as if replica a crashed
    const t0 = Date.now();
    let got: Acquired | undefined;
    await until(
      async () => {
        got = await replicaB!.acquire();
        return got.kind === 'lease';
      },
      3_000,
      'the expired reservation to free the unit',
    );
    expect(Date.now() - t0).toBeGreaterThanOrEqual(100);
  });

  it('a 401 or an exhaustion seen by one replica reaches the others', async () => {
    const [replicaA, replicaB] = await replicas(2, ['x', 'y']);
    for (const name of ['x', 'y']) replicaA!.learn(name, 200, { limit: 50, remaining: 50, reset: nowSeconds + 600, resource: 'core' });
    const lx = await replicaA!.acquire({ prefer: 'x' });
    if (lx.kind !== 'lease') throw new Error('no lease');
    lx.lease.settle(401, () => undefined, '{"message":"Bad credentials"}');
    // A request's 401 kills nothing by itself: GET /rate_limit answering 401 confirms it.
    replicaA!.learn('x', 401, undefined);
    const ly = await replicaA!.acquire({ prefer: 'y' });
    if (ly.kind !== 'lease') throw new Error('no lease');
    ly.lease.settle(403, rl(0, 50, nowSeconds + 900), '{"message":"API rate limit exceeded"}');
    await until(async () => (await probe(replicaB!)) === 'unavailable', 2_000, 'b to see both');
    expect(replicaB!.snapshot().map((t) => t.state)).toEqual(['dead', 'exhausted']);
  });

  it('a reserve Redis answers late (frozen a moment, not down) hands out the lease, stays shared and leaves no reservation', async () => {
    const [replicaA] = await replicas(1);
    replicaA!.learn('a', 200, { limit: 50, remaining: 40, reset: nowSeconds + 600, resource: 'core' });
    await knows(replicaA!, 40);
    await conns.at(-1)!.client.ping(); // after the cancel's release, on the same connection
    if (redis.kind !== 'process') return;
    redis.signal('SIGSTOP');
    let acquired: Acquired;
    try {
      acquired = await replicaA!.acquire(); // unanswered within command_timeout_ms
      expect(replicaA!.shared()).toBe(true);
    } finally {
      redis.signal('SIGCONT');
    }
    expect(acquired.kind).toBe('lease');
    if (acquired.kind === 'lease') acquired.lease.settle(200, rl(39), undefined);
    const client = new Redis(redis.url);
    try {
      const held = async (): Promise<number> =>
        (await Promise.all((await client.keys(`budget-test-${prefixN}:*{pool}:r:a`)).map((key) => client.zcard(key)))).reduce(
          (sum, n) => sum + n,
          0,
        );
      await until(async () => (await held()) === 0 && replicaA!.snapshot()[0]!.remaining === 39, 5_000, 'the reservation settled');
    } finally {
      client.disconnect();
    }
  });

  it('keeps serving from a 1/N share when Redis is gone', async () => {
    const [replicaA, replicaB] = await replicas(2);
    replicaA!.learn('a', 200, { limit: 50, remaining: 40, reset: nowSeconds + 600, resource: 'core' });
    await until(() => replicaA!.replicas() === 2, 5_000, 'the heartbeat to see two replicas');
    await knows(replicaA!, 40);
    redis.signal('SIGSTOP');
    try {
      let leases = 0;
      for (let i = 0; i < 40; i++) {
        const acquired = await replicaA!.acquire();
        if (acquired.kind !== 'lease') break;
        leases++;
        acquired.lease.settle(200, rl(40 - leases), undefined);
      }
      expect(replicaA!.shared()).toBe(false);
      expect(leases).toBeLessThanOrEqual(21); // about half of 40, plus the request that found Redis gone
      expect(leases).toBeGreaterThanOrEqual(19);
    } finally {
      redis.signal('SIGCONT');
    }
    void replicaB;
  }, 20_000);
});
