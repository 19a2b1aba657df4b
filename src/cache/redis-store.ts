/**
 * L2: the shared cache in Redis, one binary value per entry (the versioned codec of entry.ts),
 * kept for freshness plus allowed staleness. Redis keys are the prefix, the schema version and a
 * hash of the cache key in a hash tag, so that an entry and its single-flight lock share a
 * Cluster slot:  etagere:v1:{<hash>}:e  and  etagere:v1:{<hash>}:lock.
 * A value that does not decode is a miss (logged once), never a crash. Every Redis failure is a
 * miss or a skipped write (see redis/connection.ts).
 */
import { createHash } from 'node:crypto';
import type { Logger } from '../log/logger.js';
import type { Metrics } from '../metrics/registry.js';
import type { RedisConnection } from '../redis/connection.js';
import { decodeEntry, encodeEntry, type CacheEntry } from './entry.js';

export type L2Lookup =
  | { kind: 'hit'; entry: CacheEntry }
  | { kind: 'miss' }
  | { kind: 'corrupt' }
  /** Redis unavailable (disconnected, breaker open, error, or no answer within lookup_timeout_ms). */
  | { kind: 'skipped' };

export interface RedisStore {
  lookup(key: string): Promise<L2Lookup>;
  set(key: string, entry: CacheEntry, ttlMs: number): Promise<void>;
  delete(key: string): Promise<void>;
  /** The Redis key of an entry, and the tag its companions share. */
  entryKey(key: string): string;
  lockKey(key: string): string;
}

/** The hash tag of a cache key: 22 base64url characters of SHA-256. */
export function keyTag(key: string): string {
  return createHash('sha256').update(key).digest('base64url').slice(0, 22);
}

export function createRedisStore(conn: RedisConnection, logger: Logger, metrics: Metrics): RedisStore {
  let corruptLogged = false;
  const results = {
    hit: metrics.l2Lookups.labels('hit'),
    miss: metrics.l2Lookups.labels('miss'),
    corrupt: metrics.l2Lookups.labels('corrupt'),
    skipped: metrics.l2Lookups.labels('skipped'),
  };
  const entryKey = (key: string): string => `${conn.prefix}{${keyTag(key)}}:e`;
  const lookup = async (key: string): Promise<L2Lookup> => {
    const raw = await conn.read('get', (r) => r.getBuffer(entryKey(key)).then((v) => v ?? false));
    if (raw === undefined) {
      results.skipped.inc();
      return { kind: 'skipped' };
    }
    if (raw === false) {
      results.miss.inc();
      return { kind: 'miss' };
    }
    const entry = decodeEntry(raw);
    if (entry === undefined) {
      results.corrupt.inc();
      if (!corruptLogged) {
        corruptLogged = true;
        logger.warn(
          { redisKey: entryKey(key) },
          'L2 value does not decode (corrupt, foreign or from another version): treated as a miss; logged once',
        );
      }
      return { kind: 'corrupt' };
    }
    results.hit.inc();
    return { kind: 'hit', entry };
  };
  return {
    lookup,
    set: async (key, entry, ttlMs) => {
      const value = encodeEntry(entry);
      await conn.run('set', (r) => r.set(entryKey(key), value, 'PX', Math.max(1, Math.ceil(ttlMs))));
    },
    delete: async (key) => {
      await conn.run('del', (r) => r.del(entryKey(key)));
    },
    entryKey,
    lockKey: (key) => `${conn.prefix}{${keyTag(key)}}:lock`,
  };
}
