/**
 * A Redis that answers in time is not failed because this process was busy. After the event loop
 * is held up (a burst of requests, a GC pause), expired timers run before the socket is read:
 * ioredis's own command timeout used to fail commands whose answers had already arrived, the
 * breaker opened after three, and every replica went on without Redis (and without the
 * cross-replica lock: three replicas each fetched the same cold key).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisConnection } from '../../src/platform/redis/connection.js';
import { connectProxyRedis, startRedis, type TestRedis } from '../helpers/redis.js';

/** Holds the event loop, as a burst of synchronous work does. */
function busy(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until);
}

describe('Redis commands while the event loop is held up', () => {
  let redis: TestRedis;
  let conn: RedisConnection;

  beforeAll(async () => {
    redis = await startRedis();
    conn = await connectProxyRedis({ url: redis.url, key_prefix: 'stall:', command_timeout_ms: 50 });
  }, 30_000);

  afterAll(async () => {
    await conn?.close();
    await redis?.stop();
  });

  it('answers that arrived while the process was busy count, and the breaker stays closed', async () => {
    for (let round = 0; round < 5; round++) {
      const commands = Array.from({ length: 10 }, (_, index) => conn.run('get', (client) => client.set(`stall:${round}:${index}`, 'v')));
      await new Promise<void>((resolve) => setImmediate(resolve)); // the auto-pipeline has gone out
      busy(200); // four times the command timeout, while Redis answers at once
      expect(await Promise.all(commands)).toEqual(Array.from({ length: 10 }, () => 'OK'));
    }
    expect(conn.up()).toBe(true);
  });
});
