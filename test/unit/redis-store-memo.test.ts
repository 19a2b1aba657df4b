/**
 * The L2 store's memo of decoded values (cache.l1: false): a hit still reads Redis every time, and
 * reuses what it decoded only while Redis holds the same write (stamp and length); anything else
 * (a new write, a garbled or deleted value) is read as it is now. A fake connection stands in for
 * Redis: it answers GET with a fresh copy of what it holds, as a reply buffer would be.
 */
import { describe, expect, it } from 'vitest';
import { encodeEntry, ENTRY_HEAD_BYTES } from '../../src/cache/store/entry-codec.js';
import type { CacheEntry } from '../../src/cache/rules/entry.js';
import { createRedisStore, type RedisStore } from '../../src/cache/store/redis-store.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { createMetrics, type Metrics } from '../../src/platform/metrics/registry.js';
import type { RedisClient, RedisConnection } from '../../src/platform/redis/connection.js';
import { testEntry } from '../helpers/entry.js';

const entry = (body: string, storedAt = 1_700_000_000_000): CacheEntry =>
  testEntry({ body: Buffer.from(body), etag: '"a"', storedAt, lifetime: 60 });

/** A Redis of one map; `reads` counts GETs, `replies` keeps every reply buffer handed out. */
function fakeRedis() {
  const values = new Map<string, Buffer>();
  const replies: Buffer[] = [];
  let reads = 0;
  const client = {
    getBuffer: async (key: string) => {
      reads++;
      const value = values.get(key);
      if (value === undefined) return null;
      const reply = Buffer.from(value);
      replies.push(reply);
      return reply;
    },
    set: async (key: string, value: Buffer) => {
      values.set(key, Buffer.from(value));
      return 'OK';
    },
    del: async (key: string) => Number(values.delete(key)),
  } as unknown as RedisClient;
  const conn = {
    client,
    prefix: 'test:v1:',
    cluster: false,
    run: async <T>(_op: string, fn: (redis: RedisClient) => Promise<T>) => fn(client),
    read: async <T>(_op: string, fn: (redis: RedisClient) => Promise<T>) => fn(client),
    up: () => true,
  } as unknown as RedisConnection;
  return { conn, values, replies, reads: () => reads };
}

function storeWith(memoBytes: number): { store: RedisStore; redis: ReturnType<typeof fakeRedis>; metrics: Metrics } {
  const redis = fakeRedis();
  const metrics = createMetrics({ defaultMetrics: false });
  return { store: createRedisStore(redis.conn, createLogger({ level: 'silent' }), metrics, memoBytes), redis, metrics };
}

async function hitOf(store: RedisStore, key: string): Promise<CacheEntry> {
  const found = await store.get(key);
  if (found.kind !== 'hit') throw new Error(`expected a hit, got ${found.kind}`);
  return found.entry;
}

describe('L2 decoded-value memo (L1 off)', () => {
  it('reads Redis on every hit and reuses the decoded entry while the stored write is the same', async () => {
    const { store, redis } = storeWith(1 << 20);
    redis.values.set(store.entryKey('k'), encodeEntry(entry('{"v":1}')));
    const first = await hitOf(store, 'k');
    const second = await hitOf(store, 'k');
    expect(redis.reads()).toBe(2);
    expect(second).toBe(first);
    expect(second.body.toString()).toBe('{"v":1}');
    // The kept body is its own copy, not a view into a reply buffer: overwriting the replies changes nothing.
    for (const reply of redis.replies) reply.fill(0x21);
    expect(first.body.toString()).toBe('{"v":1}');
    expect(store.memoBytes).toBeGreaterThan(0);
  });

  it('gives the new entry at once when another replica wrote the key (a new stamp), even at the same length', async () => {
    const { store, redis } = storeWith(1 << 20);
    redis.values.set(store.entryKey('k'), encodeEntry(entry('{"v":1}')));
    await hitOf(store, 'k');
    redis.values.set(store.entryKey('k'), encodeEntry(entry('{"v":2}')));
    expect((await hitOf(store, 'k')).body.toString()).toBe('{"v":2}');
  });

  it('does not take a value with the kept stamp but another length for the kept entry', async () => {
    const { store, redis } = storeWith(1 << 20);
    const value = encodeEntry(entry('{"v":1}'));
    redis.values.set(store.entryKey('k'), value);
    await hitOf(store, 'k');
    // Same stamp, a longer (garbled) value: decoded as it is, a corrupt value is a miss.
    redis.values.set(store.entryKey('k'), Buffer.concat([value.subarray(0, ENTRY_HEAD_BYTES), Buffer.from('garbage, not JSON')]));
    expect((await store.get('k')).kind).toBe('corrupt');
    // Same stamp and total length, a garbled metadata length: decoded as it is, so corrupt.
    const garbled = Buffer.from(value);
    garbled.writeUInt32BE(0xffffffff, 7);
    redis.values.set(store.entryKey('k'), value);
    await hitOf(store, 'k');
    redis.values.set(store.entryKey('k'), garbled);
    expect((await store.get('k')).kind).toBe('corrupt');
    // Same stamp, truncated below the head: corrupt too.
    redis.values.set(store.entryKey('k'), value.subarray(0, 5));
    expect((await store.get('k')).kind).toBe('corrupt');
  });

  it('reads a deleted or expired key as a miss, and forgets it', async () => {
    const { store, redis } = storeWith(1 << 20);
    redis.values.set(store.entryKey('k'), encodeEntry(entry('{"v":1}')));
    await hitOf(store, 'k');
    redis.values.delete(store.entryKey('k'));
    expect((await store.get('k')).kind).toBe('miss');
    expect(store.memoBytes).toBe(0);
  });

  it('keeps what this replica wrote, so its next hit does not decode; a later write by another replica wins', async () => {
    const { store, redis } = storeWith(1 << 20);
    const mine = entry('{"mine":true}');
    await store.set('k', mine, 60_000);
    expect(await hitOf(store, 'k')).toBe(mine);
    redis.values.set(store.entryKey('k'), encodeEntry(entry('{"theirs":true}')));
    expect((await hitOf(store, 'k')).body.toString()).toBe('{"theirs":true}');
    await store.delete('k');
    expect((await store.get('k')).kind).toBe('miss');
  });

  it('stays within its byte bound: an entry larger than the bound is decoded per hit, not kept', async () => {
    const { store, redis } = storeWith(4096);
    redis.values.set(store.entryKey('big'), encodeEntry(entry('x'.repeat(10_000))));
    const first = await hitOf(store, 'big');
    const second = await hitOf(store, 'big');
    expect(second.body.equals(first.body)).toBe(true);
    expect(second).not.toBe(first);
    expect(store.memoBytes).toBeLessThanOrEqual(4096);
  });

  it('without a memo (L1 on), a hit decodes the body as a view into the reply, without copying it', async () => {
    const { store, redis } = storeWith(0);
    redis.values.set(store.entryKey('k'), encodeEntry(entry('{"v":1}')));
    const first = await hitOf(store, 'k');
    const reply = redis.replies.at(-1)!;
    reply.fill(0x21, reply.length - 7);
    expect(first.body.toString()).toBe('!!!!!!!');
    expect(await hitOf(store, 'k')).not.toBe(first);
    expect(store.memoBytes).toBe(0);
  });
});
