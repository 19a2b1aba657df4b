/**
 * Distributed single flight: on an L1 and L2 miss, one replica takes a short lock per key
 * (SET NX PX) and fetches; the others poll the L2 key (and the lock) until the winner's entry
 * appears, the lock is gone without one (the answer was not storable), or their deadline passes,
 * and then fetch themselves. A lock is released only by its owner (compare-and-delete script).
 */
import { randomBytes } from 'node:crypto';
import type { RedisConnection } from '../../platform/redis/connection.js';
import { decodeEntry } from './entry-codec.js';
import type { CacheEntry } from '../rules/entry.js';
import type { HeaderTable } from './header-intern.js';
import type { RedisStore } from './redis-store.js';

export type LockResult = { kind: 'won'; release(): Promise<void> } | { kind: 'lost' } | { kind: 'unavailable' };

export type WaitResult = { kind: 'entry'; entry: CacheEntry } | { kind: 'gone' } | { kind: 'timeout' } | { kind: 'unavailable' };

export interface FlightLock {
  acquire(key: string): Promise<LockResult>;
  /**
   * Waits for another replica's entry under `key` (polling L2 every `pollMs`); with `newerThan`,
   * for one stored after then (a revalidation's: the entry it revalidates is there already).
   */
  waitFor(key: string, deadlineMs: number, newerThan?: number): Promise<WaitResult>;
}

const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

/** `headerTable`: the cache's shared header fields, which an entry read while waiting points at. */
export function createFlightLock(
  conn: RedisConnection,
  l2: RedisStore,
  lockMs: number,
  headerTable?: HeaderTable,
  pollMs = 20,
): FlightLock {
  const owner = randomBytes(9).toString('base64url');
  let lockCount = 0;
  return {
    async acquire(key) {
      const lockKey = l2.lockKey(key);
      const token = `${owner}:${++lockCount}`;
      const reply = await conn.run('lock', (c) => c.set(lockKey, token, 'PX', lockMs, 'NX'));
      if (reply === undefined) return { kind: 'unavailable' };
      if (reply !== 'OK') return { kind: 'lost' };
      return {
        kind: 'won',
        release: async () => {
          await conn.run('unlock', (c) => c.eval(RELEASE, 1, lockKey, token));
        },
      };
    },
    async waitFor(key, deadlineMs, newerThan) {
      const entryKey = l2.entryKey(key);
      const lockKey = l2.lockKey(key);
      for (;;) {
        // Entry and lock share a hash tag, so one round trip works on a Cluster too.
        const reply = await conn.run('wait', (client) =>
          client
            .multi()
            .getBuffer(entryKey)
            .exists(lockKey)
            .exec()
            .then((res) => res as Array<[Error | null, unknown]> | null),
        );
        if (reply === undefined || reply === null) return { kind: 'unavailable' };
        const value = reply[0]?.[1];
        const entry = Buffer.isBuffer(value) ? decodeEntry(value, headerTable) : undefined;
        if (entry !== undefined && (newerThan === undefined || entry.storedAt > newerThan)) return { kind: 'entry', entry };
        if (reply[1]?.[1] === 0) return { kind: 'gone' };
        if (Date.now() + pollMs > deadlineMs) return { kind: 'timeout' };
        await new Promise<void>((resolve) => setTimeout(resolve, pollMs).unref());
      }
    },
  };
}
