/** L1: an in-process LRU bounded by total bytes, with a per-entry size cap. */
import { LRUCache } from 'lru-cache';
import { entrySize, type CacheEntry } from './entry.js';

export interface MemoryStoreOptions {
  maxBytes: number;
  maxEntryBytes: number;
  onEvict?: () => void;
}

/** The small interface the request path needs of L1 (undici's cache stores are the model). */
export interface MemoryStore {
  get(key: string): CacheEntry | undefined;
  set(key: string, entry: CacheEntry, ttlMs: number): void;
  delete(key: string): void;
  readonly size: number;
  readonly bytes: number;
  keys(): IterableIterator<string>;
  clear(): void;
}

export function createMemoryStore(opts: MemoryStoreOptions): MemoryStore {
  const lru = new LRUCache<string, CacheEntry>({
    maxSize: opts.maxBytes,
    maxEntrySize: opts.maxEntryBytes,
    sizeCalculation: (entry, key) => entrySize(key, entry),
    ttlAutopurge: false,
    allowStale: false,
    updateAgeOnGet: false,
    ...(opts.onEvict === undefined
      ? {}
      : {
          dispose: (_v: CacheEntry, _k: string, reason: LRUCache.DisposeReason) => {
            if (reason === 'evict') opts.onEvict?.();
          },
        }),
  });
  return {
    get: (key) => lru.get(key),
    set: (key, entry, ttlMs) => {
      lru.set(key, entry, { ttl: Math.max(1, Math.ceil(ttlMs)) });
    },
    delete: (key) => {
      lru.delete(key);
    },
    get size() {
      return lru.size;
    },
    get bytes() {
      return lru.calculatedSize;
    },
    keys: () => lru.keys(),
    clear: () => lru.clear(),
  };
}

/** An L1 that keeps nothing (cache.l1: false): every lookup goes to L2. */
export function createDisabledStore(): MemoryStore {
  return {
    get: () => undefined,
    set: () => undefined,
    delete: () => undefined,
    size: 0,
    bytes: 0,
    keys: () => [][Symbol.iterator](),
    clear: () => undefined,
  };
}
