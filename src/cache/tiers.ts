/**
 * The cache's storage, as the request path sees it: L1 (in-process LRU, bounded in bytes) in front
 * of L2 (Redis, shared by every replica, optional), the invalidation bus that keeps other
 * replicas' L1 copies honest, and the path invalidations of RFC 9111 section 4.4.
 *
 *   fromL1   synchronous: the hit path touches nothing else
 *   lookup   L2 when L1 had nothing (every candidate key), promoting what it finds into L1
 *   usable   the entry if this request may use it (Vary matches, path not invalidated since, its
 *            credential not rejected by the upstream since)
 *   apply    stores or drops what an upstream exchange produced, in L1 and L2, and tells the others
 */
import type { Logger } from '../log/logger.js';
import type { Metrics } from '../metrics/registry.js';
import type { RedisConnection } from '../redis/connection.js';
import { createInvalidationBus, type InvalidationBus, type InvalidationHandlers } from '../redis/invalidation-bus.js';
import type { CacheResult, Rejection } from './classify.js';
import type { CacheEntry } from './entry.js';
import { createFlightLock, type FlightLock } from './flight-lock.js';
import { pathScope, varyMatches } from './key.js';
import { createDisabledStore, createMemoryStore, type MemoryStore } from './memory-store.js';
import { currentAge, retentionSeconds } from './policy.js';
import { createRedisStore, type RedisStore } from './redis-store.js';
import { createRejectionMemo, rememberBounded } from './rejections.js';
import type { CacheRequest } from './request.js';

export interface TierSettings {
  l1: boolean;
  maxBytes: number;
  maxEntryBytes: number;
  /** Redis lock time for the distributed single flight (redis.lock_ms). */
  lockMs: number;
}

/** What an L2 lookup found; `answered` is false when Redis did not answer (down, breaker open, too slow). */
export interface Found {
  entry: CacheEntry | undefined;
  answered: boolean;
}

/** The Redis side: L2, its single-flight lock, and the bus to the other replicas. */
export interface SharedTier {
  readonly l2: RedisStore;
  readonly lock: FlightLock;
  readonly bus: InvalidationBus;
  /** Writes an entry to L2, then tells the other replicas (their older L1 copies drop). */
  store(key: string, entry: CacheEntry, ttlMs: number): void;
  drop(key: string): void;
  /** Resolves once a pending write of `key` is done. */
  written(key: string): Promise<void> | undefined;
}

export interface Tiers {
  readonly l1: MemoryStore;
  readonly shared: SharedTier | undefined;
  fromL1(req: CacheRequest): CacheEntry | undefined;
  lookup(req: CacheRequest): Promise<Found>;
  usable(req: CacheRequest, entry: CacheEntry | undefined): CacheEntry | undefined;
  apply(result: CacheResult): void;
  /** Puts an entry read from L2 into L1 for what is left of its retention. */
  promote(key: string, entry: CacheEntry): void;
  /** Resolves once a pending L2 write of `key` is done (a flight lock is released only then). */
  written(key: string): Promise<void>;
  /** Forgets every stored response for a path (after a successful unsafe method), on every replica. */
  invalidatePath(upstream: string, pathname: string): void;
  close(): void;
}

/** At most this many invalidated path scopes are remembered (oldest forgotten first). */
const MAX_INVALIDATIONS = 10_000;

export function createTiers(settings: TierSettings, metrics: Metrics, logger: Logger, redis: RedisConnection | undefined): Tiers {
  const l1 = !settings.l1
    ? createDisabledStore()
    : createMemoryStore({
        maxBytes: settings.maxBytes,
        maxEntryBytes: settings.maxEntryBytes,
        onEvict: () => metrics.cacheEvictions.inc(),
      });
  /** Path scope -> when it was invalidated: entries stored before then are not used. Likewise what the upstream rejected. */
  const invalidations = new Map<string, number>();
  const rejections = createRejectionMemo();

  const markInvalidated = (scope: string, at: number): void => {
    if (rejections.isRejection(scope)) rejections.remember(scope, at);
    else rememberBounded(invalidations, scope, at, MAX_INVALIDATIONS);
  };

  /** Remembers what the upstream rejected, here and on every replica. */
  const markRejected = (rejected: Rejection): void => {
    const at = Date.now();
    for (const scope of rejections.scopesOf(rejected)) {
      rejections.remember(scope, at);
      shared?.bus.path(scope, at);
    }
  };

  /** Notices from other replicas (redis/invalidation-bus.ts). */
  const remote: InvalidationHandlers = {
    entry(key, storedAt) {
      const entry = l1.get(key);
      if (entry !== undefined && entry.storedAt < storedAt) l1.delete(key);
    },
    dropped(key) {
      l1.delete(key);
    },
    path: markInvalidated,
  };

  const shared = redis === undefined ? undefined : createSharedTier(redis, settings.lockMs, metrics, logger, remote);

  const store = (key: string, entry: CacheEntry): void => {
    const ttlMs = retentionSeconds(entry) * 1000;
    l1.set(key, entry, ttlMs);
    shared?.store(key, entry, ttlMs);
  };

  const drop = (key: string): void => {
    l1.delete(key);
    shared?.drop(key);
  };

  /** The body is copied out of the Redis reply buffer so the L1 copy pins nothing larger than itself. */
  const promote = (key: string, entry: CacheEntry): void => {
    if (!settings.l1) return;
    const ttlMs = entry.storedAt + retentionSeconds(entry) * 1000 - Date.now();
    if (ttlMs > 0) l1.set(key, { ...entry, body: Buffer.from(entry.body) }, ttlMs);
  };

  const fromL1 = (req: CacheRequest): CacheEntry | undefined => {
    if (!req.keys.perToken) return l1.get(req.keys.flight);
    // Non-equivalent pool tokens: every token's entry is looked at.
    return freshest(
      req.keys.candidates.map((key) => l1.get(key)),
      Date.now(),
    );
  };

  const lookup = async (req: CacheRequest): Promise<Found> => {
    if (shared === undefined) return { entry: undefined, answered: true };
    const { l2 } = shared;
    const { candidates } = req.keys;
    try {
      const found = await Promise.all(candidates.map((key) => l2.lookup(key)));
      let entry: CacheEntry | undefined;
      found.forEach((result, index) => {
        if (result.kind !== 'hit') return;
        promote(candidates[index]!, result.entry);
        if (entry === undefined || result.entry.storedAt > entry.storedAt) entry = result.entry;
      });
      return { entry, answered: found.every((result) => result.kind !== 'skipped') };
    } catch (err) {
      logger.error({ err: (err as Error).message }, 'L2 lookup failed');
      return { entry: undefined, answered: false };
    }
  };

  const usable = (req: CacheRequest, entry: CacheEntry | undefined): CacheEntry | undefined => {
    if (entry === undefined || !varyMatches(entry.vary, req.header)) return undefined;
    if (rejections.size > 0 && rejections.rejectedSince(req.keys.flight, req.keys.partition, entry.storedAt)) return undefined;
    if (invalidations.size === 0) return entry;
    const at = invalidations.get(pathScope(req.upstream, req.pathname));
    return at !== undefined && entry.storedAt <= at ? undefined : entry;
  };

  return {
    l1,
    shared,
    fromL1,
    lookup,
    usable,
    promote,
    apply(result) {
      if (result.kind !== 'entry') return;
      if (result.rejected !== undefined) markRejected(result.rejected);
      if (result.storeKey !== undefined) store(result.storeKey, result.entry);
      else if (result.dropKey !== undefined) drop(result.dropKey);
    },
    written: (key) => shared?.written(key) ?? Promise.resolve(),
    invalidatePath(upstream, pathname) {
      const at = Date.now();
      const scope = pathScope(upstream, pathname);
      markInvalidated(scope, at);
      shared?.bus.path(scope, at);
    },
    close() {
      shared?.bus.close();
    },
  };
}

/** Of the entries found under several keys, a fresh one wins over a stale one, then the newest. */
function freshest(entries: ReadonlyArray<CacheEntry | undefined>, now: number): CacheEntry | undefined {
  const fresh = (entry: CacheEntry): boolean => currentAge(entry, now) < entry.lifetime;
  let best: CacheEntry | undefined;
  for (const entry of entries) {
    if (entry === undefined) continue;
    const better =
      best === undefined ||
      (fresh(entry) ? !fresh(best) || entry.storedAt > best.storedAt : !fresh(best) && entry.storedAt > best.storedAt);
    if (better) best = entry;
  }
  return best;
}

function createSharedTier(
  redis: RedisConnection,
  lockMs: number,
  metrics: Metrics,
  logger: Logger,
  remote: InvalidationHandlers,
): SharedTier {
  const l2 = createRedisStore(redis, logger, metrics);
  const bus = createInvalidationBus(redis, remote, logger);
  /** Pending L2 writes by key: a flight lock is released only once its entry is readable in L2. */
  const writes = new Map<string, Promise<void>>();
  return {
    l2,
    lock: createFlightLock(redis, l2, lockMs),
    bus,
    store(key, entry, ttlMs) {
      const write = l2.set(key, entry, ttlMs).then(
        () => bus.written(key, entry.storedAt),
        () => undefined,
      );
      writes.set(key, write);
      void write.finally(() => {
        if (writes.get(key) === write) writes.delete(key);
      });
    },
    drop(key) {
      l2.delete(key).then(
        () => bus.dropped(key),
        () => undefined,
      );
    },
    written: (key) => writes.get(key),
  };
}
