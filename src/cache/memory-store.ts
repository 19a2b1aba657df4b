/** L1: an in-process LRU bounded by total bytes, with a per-entry size cap. */
import { LRUCache } from 'lru-cache';
import { entrySize, type CacheEntry } from './entry.js';

export interface MemoryStoreOptions {
  maxBytes: number;
  maxEntryBytes: number;
  onEvict?: () => void;
  /** A key entered the store, and left it (evicted, expired, deleted, or replaced by a value over the entry cap): the path index. */
  onKeys?: { added(key: string): void; removed(key: string): void };
}

/** The small interface the request path needs of L1 (undici's cache stores are the model). */
export interface MemoryStore {
  get(key: string): CacheEntry | undefined;
  /** The entry without touching its recency (undefined once expired). */
  peek(key: string): CacheEntry | undefined;
  set(key: string, entry: CacheEntry, ttlMs: number): void;
  /** Replaces a held entry, keeping its expiry (a stale mark); nothing when the key is not held. */
  replace(key: string, entry: CacheEntry): void;
  delete(key: string): void;
  readonly size: number;
  readonly bytes: number;
  /** Body bytes of the entries held: as stored (encoded) and decoded (the compression metric). */
  readonly bodyBytes: { stored: number; decoded: number };
  keys(): IterableIterator<string>;
  clear(): void;
}

export function createMemoryStore(opts: MemoryStoreOptions): MemoryStore {
  /** The entries counted in bodyBytes (an entry the LRU refused is never counted, nor uncounted). */
  const counted = new WeakSet<CacheEntry>();
  const bodyBytes = { stored: 0, decoded: 0 };
  const lru = new LRUCache<string, CacheEntry>({
    maxSize: opts.maxBytes,
    maxEntrySize: opts.maxEntryBytes,
    sizeCalculation: (entry, key) => entrySize(key, entry),
    ttlAutopurge: false,
    allowStale: false,
    updateAgeOnGet: false,
    dispose: (entry: CacheEntry, key: string, reason: LRUCache.DisposeReason) => {
      if (counted.delete(entry)) {
        bodyBytes.stored -= entry.body.length;
        bodyBytes.decoded -= entry.decodedSize;
      }
      if (reason === 'evict') opts.onEvict?.();
      // 'set': replaced by a new value (still held), or dropped for a value over the cap (set() checks).
      if (reason !== 'set') opts.onKeys?.removed(key);
    },
    ...(opts.onKeys === undefined
      ? {}
      : {
          onInsert: (_v: CacheEntry, key: string, reason: LRUCache.InsertReason) => {
            if (reason === 'add') opts.onKeys?.added(key);
          },
        }),
  });
  /** Counts a stored entry's body bytes once (the gauges of stored and decoded bytes). */
  const countIn = (key: string, entry: CacheEntry): void => {
    if (lru.peek(key) !== entry || counted.has(entry)) return;
    counted.add(entry);
    bodyBytes.stored += entry.body.length;
    bodyBytes.decoded += entry.decodedSize;
  };
  return {
    get: (key) => lru.get(key),
    peek: (key) => lru.peek(key),
    set: (key, entry, ttlMs) => {
      lru.set(key, entry, { ttl: Math.max(1, Math.ceil(ttlMs)) });
      if (opts.onKeys !== undefined && !lru.has(key)) opts.onKeys.removed(key);
      countIn(key, entry);
    },
    replace: (key, entry) => {
      if (!lru.has(key)) return;
      lru.set(key, entry, { noUpdateTTL: true });
      countIn(key, entry);
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
    get bodyBytes() {
      return { ...bodyBytes };
    },
    keys: () => lru.keys(),
    clear: () => lru.clear(),
  };
}

/** An L1 that keeps nothing (cache.l1: false): every lookup goes to L2. */
export function createDisabledStore(): MemoryStore {
  return {
    get: () => undefined,
    peek: () => undefined,
    set: () => undefined,
    replace: () => undefined,
    delete: () => undefined,
    size: 0,
    bytes: 0,
    bodyBytes: { stored: 0, decoded: 0 },
    keys: () => [][Symbol.iterator](),
    clear: () => undefined,
  };
}
