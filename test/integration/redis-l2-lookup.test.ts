/**
 * The L2 lookup of a request with several candidate keys (non-equivalent pool tokens, L1 off):
 * every candidate is looked up, in one write to Redis (ioredis auto-pipelining of the lookups
 * issued in one turn), and the newest entry is the answer. A real Redis; the socket's writes are counted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { POOL } from '../../src/cache/rules/key.js';
import { keysFor, type CacheRequest, type PoolMembers } from '../../src/cache/rules/request.js';
import { Cache } from '../../src/cache/store/cache.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { createMetrics } from '../../src/platform/metrics/registry.js';
import type { RedisConnection } from '../../src/platform/redis/connection.js';
import { connectProxyRedis, startRedis, type TestRedis } from '../helpers/redis.js';
import { poolEntry, storedBy } from '../helpers/entry.js';

const TOKENS = ['t1', 't2', 't3'];
const pool: PoolMembers = { names: TOKENS, has: (name) => TOKENS.includes(name) };

function request(pathname: string): CacheRequest {
  const input = { upstream: 'github', pathname, search: '', accept: undefined, apiVersion: undefined, partition: POOL };
  return {
    keys: keysFor(input, pool),
    upstream: 'github',
    pathname,
    method: 'GET',
    directives: {},
    header: () => undefined,
    credential: 'pool',
    policy: { kind: 'max-age' } as CacheRequest['policy'],
  };
}

/** Counts the writes on the connection's socket while `during` runs. */
async function writesDuring<T>(conn: RedisConnection, during: () => Promise<T>): Promise<{ value: T; writes: number }> {
  const stream = (conn.client as Redis).stream;
  const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
  let writes = 0;
  stream.write = ((...args: unknown[]) => {
    writes++;
    return write(...args);
  }) as typeof stream.write;
  try {
    return { value: await during(), writes };
  } finally {
    stream.write = write as typeof stream.write;
  }
}

describe('L2 lookups of several candidate keys', () => {
  let redis: TestRedis;
  let conn: RedisConnection;
  let tiers: Cache;

  beforeAll(async () => {
    redis = await startRedis();
    conn = await connectProxyRedis({ url: redis.url, key_prefix: 'etagere-lookup-test:' });
    tiers = new Cache(
      { l1: false, maxBytes: 1 << 26, maxEntryBytes: 1 << 16, lockMs: 1000 },
      createMetrics({ defaultMetrics: false }),
      createLogger({ level: 'silent' }),
      conn,
    );
  });
  afterAll(async () => {
    tiers?.close();
    await conn?.close();
    await redis?.stop();
  });

  it('asks Redis for every candidate in one write, and answers with the newest entry', async () => {
    const req = request('/users/carol');
    expect(req.keys.candidates.length).toBe(3);
    const now = Date.now();
    for (const [index, token] of TOKENS.entries()) {
      const result = storedBy(req, token, poolEntry(token, { storedAt: now - 10_000 + index * 1000 }));
      tiers.apply(result);
      await tiers.written(req.keys.store(token));
    }
    const { value: found, writes } = await writesDuring(conn, () => tiers.lookup(req));
    expect(writes).toBe(1);
    expect(found.answered).toBe(true);
    expect(found.entry?.body.toString()).toBe('{"by":"t3"}');
  });

  it('a lookup where no candidate is stored is a miss that Redis answered, in one write too', async () => {
    const { value: found, writes } = await writesDuring(conn, () => tiers.lookup(request('/users/nobody')));
    expect(writes).toBe(1);
    expect(found).toEqual({ entry: undefined, answered: true });
  });

  it('the socket counter sees separate writes for lookups made one after another (the count means something)', async () => {
    const req = request('/users/carol');
    const { writes } = await writesDuring(conn, async () => {
      await tiers.lookup(req);
      await tiers.lookup(req);
    });
    expect(writes).toBe(2);
  });
});
