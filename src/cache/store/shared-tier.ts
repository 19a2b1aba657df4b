/**
 * The Redis side of the cache: L2 (redis-store.ts), its single-flight lock (flight-lock.ts), the
 * bus that tells the other replicas what this one wrote, dropped and invalidated
 * (invalidation-bus.ts), and the stale marks kept for replicas that start later (shared-marks.ts).
 */
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import type { RedisConnection } from '../../platform/redis/connection.js';
import type { CacheEntry } from '../rules/entry.js';
import type { StaleMarksSettings } from '../rules/stale-marks.js';
import { createFlightLock, type FlightLock } from './flight-lock.js';
import type { HeaderTable } from './header-intern.js';
import { createInvalidationBus, type InvalidationBus, type InvalidationHandlers } from './invalidation-bus.js';
import { createRedisStore, type RedisStore } from './redis-store.js';
import { createSharedMarks, type SharedMarks } from './shared-marks.js';

/** The Redis side: L2, its single-flight lock, and the bus to the other replicas. */
export interface SharedTier {
  readonly l2: RedisStore;
  readonly lock: FlightLock;
  readonly bus: InvalidationBus;
  /** Stale marks kept for replicas that start later. */
  readonly marks: SharedMarks;
  /** Writes an entry to L2, then tells the other replicas (their older L1 copies drop). */
  store(key: string, entry: CacheEntry, ttlMs: number): void;
  drop(key: string): void;
  /** Resolves once a pending write of `key` is done. */
  written(key: string): Promise<void> | undefined;
}

export interface SharedSettings {
  /** Redis lock time for the distributed single flight (redis.lock_ms). */
  readonly lockMs: number;
  readonly marks: StaleMarksSettings;
  /** Bytes of the L2 store's memo of decoded values (0: none; L1 is on). */
  readonly memoBytes: number;
  readonly headerTable: HeaderTable;
}

export function createSharedTier(
  redis: RedisConnection,
  settings: SharedSettings,
  metrics: Metrics,
  logger: Logger,
  remote: InvalidationHandlers,
): SharedTier {
  const l2 = createRedisStore(redis, logger, metrics, settings.memoBytes, settings.headerTable);
  const bus = createInvalidationBus(redis, remote, logger);
  /** Pending L2 writes by key: a flight lock is released only once its entry is readable in L2. */
  const writes = new Map<string, Promise<void>>();
  return {
    l2,
    lock: createFlightLock(redis, l2, settings.lockMs, settings.headerTable),
    bus,
    marks: createSharedMarks(redis, settings.marks.horizonMs, settings.marks.maxScopes),
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
