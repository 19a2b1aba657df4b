/**
 * L2: the shared cache in Redis, one binary value per entry (the versioned codec of entry-codec.ts),
 * kept for freshness plus allowed staleness. Redis keys are the prefix, the schema version and a
 * hash of the cache key in a hash tag, so that an entry and its single-flight lock share a
 * Cluster slot:  etagere:v1:{<hash>}:e  and  etagere:v1:{<hash>}:lock.
 * A value that does not decode is a miss (logged once), never a crash. Every Redis failure is a
 * miss or a skipped write (see redis/connection.ts).
 *
 * With L1 off (`memoBytes` > 0) a decoded value is kept per cache key with its write stamp
 * (entry-codec.ts), bounded in bytes: a hit still reads the value from Redis (one GET, so it sees
 * every write and every expiry at once), and while the value carries the same stamp and lengths it
 * gives the entry decoded before (the stamp is trusted as the write's identity: the bytes are not compared): the same object, so the memos keyed by the entry (its flattened
 * headers, its gunzipped form: entry-form.ts) hold too. Its body is a copy, pinning nothing
 * of a reply buffer; without the memo the body is a view into the reply (no copy).
 */
import { createHash } from 'node:crypto';
import type { Logger } from '../../platform/log/logger.js';
import { createMemo, ownedCopy } from '../../platform/bytes.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import type { RedisConnection } from '../../platform/redis/connection.js';
import { decodeEntry, encodeEntry, entryMetaLength, entrySize, entryStamp } from './entry-codec.js';
import type { CacheEntry } from '../rules/entry.js';
import type { HeaderTable } from './header-intern.js';
import type { Store } from './memory-store.js';

export type L2Lookup =
  | { kind: 'hit'; entry: CacheEntry }
  | { kind: 'miss' }
  | { kind: 'corrupt' }
  /** Redis unavailable (disconnected, breaker open, error, or no answer within lookup_timeout_ms). */
  | { kind: 'skipped' };

/** L2: an asynchronous store (memory-store.ts `Store`) whose reads say why they found nothing. */
export interface RedisStore extends Store<Promise<L2Lookup>, Promise<void>> {
  /** The Redis key of an entry, and the tag its companions share. */
  entryKey(key: string): string;
  lockKey(key: string): string;
  /** Bytes the decoded-value memo holds (0 without one). */
  readonly memoBytes: number;
}

/** A value decoded once: its write stamp and lengths, the entry, and the Redis key (hashed once). */
interface Decoded {
  readonly stamp: number;
  readonly metaLength: number;
  readonly length: number;
  readonly entry: CacheEntry;
  readonly redisKey: string;
}

/** The hash tag of a cache key: 22 base64url characters of SHA-256. */
export function keyTag(key: string): string {
  return createHash('sha256').update(key).digest('base64url').slice(0, 22);
}

/** `headerTable`: the cache's shared header fields, which the entries read back point at. */
export function createRedisStore(
  conn: RedisConnection,
  logger: Logger,
  metrics: Metrics,
  memoBytes = 0,
  headerTable?: HeaderTable,
): RedisStore {
  let corruptLogged = false;
  const memo =
    memoBytes <= 0
      ? undefined
      : createMemo<string, Decoded>(memoBytes, (key, decoded) => entrySize(key, decoded.entry) + decoded.redisKey.length);
  const results = {
    hit: metrics.l2Lookups.labels('hit'),
    miss: metrics.l2Lookups.labels('miss'),
    corrupt: metrics.l2Lookups.labels('corrupt'),
    skipped: metrics.l2Lookups.labels('skipped'),
  };
  const entryKey = (key: string): string => `${conn.prefix}{${keyTag(key)}}:e`;
  const get = async (key: string): Promise<L2Lookup> => {
    const known = memo?.get(key);
    const redisKey = known?.redisKey ?? entryKey(key);
    const raw = await conn.read('get', (r) => r.getBuffer(redisKey));
    if (raw === undefined) {
      results.skipped.inc();
      return { kind: 'skipped' };
    }
    if (raw === null) {
      if (known !== undefined) memo?.delete(key);
      results.miss.inc();
      return { kind: 'miss' };
    }
    const stamp = entryStamp(raw);
    if (known !== undefined && known.stamp === stamp && known.length === raw.length && known.metaLength === entryMetaLength(raw)) {
      results.hit.inc();
      return { kind: 'hit', entry: known.entry };
    }
    let entry = decodeEntry(raw, headerTable);
    if (entry === undefined) {
      if (known !== undefined) memo?.delete(key);
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
    if (memo !== undefined && stamp !== undefined) {
      entry = { ...entry, body: ownedCopy(entry.body) };
      memo.set(key, { stamp, metaLength: entryMetaLength(raw), length: raw.length, entry, redisKey });
    }
    results.hit.inc();
    return { kind: 'hit', entry };
  };
  return {
    get,
    set: async (key, entry, ttlMs) => {
      const value = encodeEntry(entry);
      const redisKey = entryKey(key);
      // What this replica wrote is what its next read finds, unless another write came between (its stamp differs).
      memo?.set(key, { stamp: entryStamp(value)!, metaLength: entryMetaLength(value), length: value.length, entry, redisKey });
      await conn.run('set', (r) => r.set(redisKey, value, 'PX', Math.max(1, Math.ceil(ttlMs))));
    },
    delete: async (key) => {
      memo?.delete(key);
      await conn.run('del', (r) => r.del(entryKey(key)));
    },
    entryKey,
    lockKey: (key) => `${conn.prefix}{${keyTag(key)}}:lock`,
    get memoBytes() {
      return memo?.bytes ?? 0;
    },
  };
}
