/**
 * The shared Redis test helper: a single server (from REDIS_URL, a container or a spawned
 * redis-server) that can be killed and restarted, and a three-node local cluster.
 */
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisKind, startRedis, startRedisCluster, type TestRedis } from '../helpers/redis.js';

/** Fail fast against a dead server instead of queueing and reconnecting for ever. */
const FAST = {
  maxRetriesPerRequest: 1,
  connectTimeout: 500,
  commandTimeout: 1_000,
  retryStrategy: (times: number) => (times > 3 ? null : 50),
} as const;

/** Runs `fn` with a fresh client on `url`, always closing it. */
async function withClient<T>(url: string, fn: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis(url, FAST);
  client.on('error', () => {}); // connection errors surface through the rejected commands
  try {
    return await fn(client);
  } finally {
    client.disconnect();
  }
}

/** Whether a PING on `url` succeeds. */
async function reachable(url: string): Promise<boolean> {
  return withClient(url, async (r) => (await r.ping()) === 'PONG').catch(() => false);
}

/** Polls `check` every 20 ms until it holds; fails after `ms`. */
async function eventually(ms: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

// Known at collection time (nothing started yet), for it.skipIf.
const notProcess = (await redisKind()) !== 'process';

describe('startRedis', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
    await redis?.stop(); // idempotent
  });

  it('gives a Redis that stores and returns values', async () => {
    expect(redis.url).toMatch(/^rediss?:\/\//);
    await withClient(redis.url, async (client) => {
      await client.set('helper:k', 'v1');
      expect(await client.get('helper:k')).toBe('v1');
    });
  });

  it.skipIf(notProcess)("signal('SIGKILL') makes it unreachable", async () => {
    redis.signal('SIGKILL');
    await eventually(2_000, async () => !(await reachable(redis.url)));
    await redis.restart(); // leave a working server for the next test
  });

  it.skipIf(notProcess)('restart() brings it back on the same url', async () => {
    const url = redis.url;
    redis.signal('SIGKILL');
    await redis.restart();
    expect(redis.url).toBe(url);
    await withClient(url, async (client) => {
      expect(await client.get('helper:k')).toBeNull(); // a new, empty server (no persistence)
      await client.set('helper:k', 'v2');
      expect(await client.get('helper:k')).toBe('v2');
    });
  });
});

describe('startRedisCluster', () => {
  it('joins three nodes into a working cluster', { timeout: 30_000 }, async () => {
    const cluster = await startRedisCluster();
    const client = new Cluster(cluster.nodes, {
      redisOptions: { maxRetriesPerRequest: 1, connectTimeout: 500, commandTimeout: 2_000 },
      clusterRetryStrategy: (times: number) => (times > 3 ? null : 50),
    });
    client.on('error', () => {});
    try {
      expect(cluster.nodes).toHaveLength(3);

      // 20 keys hash to slots owned by different nodes.
      const keys = Array.from({ length: 20 }, (_, i) => `helper:cluster:${i}`);
      for (const key of keys) await client.set(key, `value-${key}`);
      for (const key of keys) expect(await client.get(key)).toBe(`value-${key}`);
      const sizes = await Promise.all(client.nodes('master').map((node) => node.dbsize()));
      expect(sizes).toHaveLength(3);
      expect(sizes.reduce((a, b) => a + b, 0)).toBe(20);
      expect(sizes.filter((n) => n > 0).length).toBeGreaterThan(1);

      const seed = cluster.nodes[0];
      if (!seed) throw new Error('no seed node');
      await withClient(`redis://${seed.host}:${seed.port}`, async (client) => {
        expect(await client.cluster('INFO')).toContain('cluster_state:ok');
      });
    } finally {
      client.disconnect();
      await cluster.stop();
    }
  });
});
