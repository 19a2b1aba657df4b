/**
 * The shared token budget's Lua scripts against a real Redis: replicas racing for the last
 * units never hand out more than remain, a crashed replica's reservations expire, what one
 * replica learns (401, exhaustion) reaches the others, and an outage falls back to 1/N.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log/logger.js';
import { createMetrics } from '../../src/metrics/registry.js';
import { createRedisConnection, type RedisConnection } from '../../src/redis/connection.js';
import { createTokenPool } from '../../src/tokens/local-pool.js';
import { createSharedTokenPool, type SharedTokenPool } from '../../src/tokens/shared-pool.js';
import type { Acquired } from '../../src/tokens/types.js';
import { parseConfig } from '../../src/config/load.js';
import { until } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';

const logger = createLogger({ level: 'silent' });
const s = Math.floor(Date.now() / 1000);
const rl =
  (remaining: number, limit = 50, reset = s + 600) =>
  (n: string) =>
    ({ 'x-ratelimit-limit': String(limit), 'x-ratelimit-remaining': String(remaining), 'x-ratelimit-reset': String(reset) })[n];

describe('shared token budget (Lua scripts on a real Redis)', () => {
  let redis: TestRedis;
  const conns: RedisConnection[] = [];
  const pools: SharedTokenPool[] = [];
  let prefixN = 0;

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    for (const p of pools) p.close();
    for (const c of conns) await c.close();
    await redis?.stop();
  });

  async function replicas(count: number, tokens = ['a'], reservationMs?: number): Promise<SharedTokenPool[]> {
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
      });
      const pool = createSharedTokenPool(
        local,
        conn,
        { perTokenConcurrency: 100, maxConcurrency: 1000, queueTimeoutMs: 200, reservationMs },
        logger,
      );
      pools.push(pool);
      out.push(pool);
    }
    return out;
  }

  it('replicas racing for the last units never hand out more than remain', async () => {
    const [a, b, c] = await replicas(3);
    a!.learn('a', 200, { limit: 50, remaining: 10, reset: s + 600, resource: 'core' });
    await until(
      async () => {
        await b!.acquire().then((r) => r.kind === 'lease' && r.lease.cancel());
        return b!.snapshot()[0]!.remaining === 10;
      },
      2_000,
      'the numbers to reach the other replicas',
    );
    const results: Acquired[] = await Promise.all(Array.from({ length: 60 }, (_, i) => [a, b, c][i % 3]!.acquire()));
    const leases = results.filter((r) => r.kind === 'lease');
    expect(leases).toHaveLength(10);
    expect(results.filter((r) => r.kind === 'unavailable').length).toBe(50);
    // Every lease spends its unit: the shared remaining reaches 0 and nobody gets more.
    let left = 10;
    for (const r of leases) if (r.kind === 'lease') r.lease.settle(200, rl(--left), undefined);
    await until(async () => (await c!.acquire()).kind === 'unavailable', 2_000, 'the pool to be spent');
  });

  it('a replica that dies mid-request frees its units when the reservation expires', async () => {
    const [a, b] = await replicas(2, ['a'], 300);
    a!.learn('a', 200, { limit: 50, remaining: 1, reset: s + 600, resource: 'core' });
    const held = await a!.acquire();
    expect(held.kind).toBe('lease'); // never settled: as if replica a crashed
    const t0 = Date.now();
    let got: Acquired | undefined;
    await until(
      async () => {
        got = await b!.acquire();
        return got.kind === 'lease';
      },
      3_000,
      'the expired reservation to free the unit',
    );
    expect(Date.now() - t0).toBeGreaterThanOrEqual(100);
  });

  it('a 401 or an exhaustion seen by one replica reaches the others', async () => {
    const [a, b] = await replicas(2, ['x', 'y']);
    for (const n of ['x', 'y']) a!.learn(n, 200, { limit: 50, remaining: 50, reset: s + 600, resource: 'core' });
    const lx = await a!.acquire({ prefer: 'x' });
    if (lx.kind !== 'lease') throw new Error('no lease');
    lx.lease.settle(401, () => undefined, '{"message":"Bad credentials"}');
    const ly = await a!.acquire({ prefer: 'y' });
    if (ly.kind !== 'lease') throw new Error('no lease');
    ly.lease.settle(403, rl(0, 50, s + 900), '{"message":"API rate limit exceeded"}');
    await until(
      async () => {
        const r = await b!.acquire();
        if (r.kind === 'lease') r.lease.cancel();
        return r.kind === 'unavailable';
      },
      2_000,
      'b to see both',
    );
    expect(b!.snapshot().map((t) => t.state)).toEqual(['dead', 'exhausted']);
  });

  it('keeps serving from a 1/N share when Redis is gone', async () => {
    const [a, b] = await replicas(2);
    a!.learn('a', 200, { limit: 50, remaining: 40, reset: s + 600, resource: 'core' });
    await until(() => a!.replicas() === 2, 5_000, 'the heartbeat to see two replicas');
    await until(
      async () => {
        const r = await a!.acquire();
        if (r.kind === 'lease') r.lease.cancel();
        return a!.snapshot()[0]!.remaining === 40;
      },
      2_000,
      'a to know its numbers',
    );
    redis.signal('SIGSTOP');
    try {
      let leases = 0;
      for (let i = 0; i < 40; i++) {
        const r = await a!.acquire();
        if (r.kind !== 'lease') break;
        leases++;
        r.lease.settle(200, rl(40 - leases), undefined);
      }
      expect(a!.shared()).toBe(false);
      expect(leases).toBeLessThanOrEqual(21); // about half of 40, plus the request that found Redis gone
      expect(leases).toBeGreaterThanOrEqual(19);
    } finally {
      redis.signal('SIGCONT');
    }
    void b;
  }, 20_000);
});
