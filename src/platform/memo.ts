/**
 * The one bounding policy of the in-process memos: bytes, least recently used first. What clients
 * send decides most keys (credentials, paths, flight keys, Host names), so the bound is on what the
 * entries weigh, not on how many there are. Each memo belongs to the instance that uses it (built
 * from src/main/services.ts), never to a module, and reports its size in `etagere_cache_bytes`.
 * Pure (no I/O, no timers); a hit allocates nothing.
 */
import { LRUCache } from 'lru-cache';

export interface Memo<K, V> {
  /** The value, now the most recently used. */
  get(key: K): V | undefined;
  /** The value, its recency unchanged. */
  peek(key: K): V | undefined;
  /** Keeps the value (the least recently used go to make room); one that alone passes the bound is not kept. */
  set(key: K, value: V): void;
  delete(key: K): void;
  clear(): void;
  /** Bytes held, as counted. */
  readonly bytes: number;
}

/** A memo of at most `maxBytes`, each entry counted as `bytesOf` says. */
export function createMemo<K extends object | string, V extends object | string>(
  maxBytes: number,
  bytesOf: (key: K, value: V) => number,
): Memo<K, V> {
  const lru = new LRUCache<K, V>({
    maxSize: Math.max(1, maxBytes),
    sizeCalculation: (value, key) => Math.max(1, Math.ceil(bytesOf(key, value))),
  });
  // lru-cache makes an options object per call when given none: one of the memo's own, so a hit allocates nothing.
  const getOptions: LRUCache.GetOptions<K, V, unknown> = {};
  const peekOptions: LRUCache.PeekOptions<K, V, unknown> = {};
  return {
    get: (key) => lru.get(key, getOptions),
    peek: (key) => lru.peek(key, peekOptions),
    set(key, value) {
      lru.set(key, value);
    },
    delete(key) {
      lru.delete(key);
    },
    clear() {
      lru.clear();
    },
    get bytes() {
      return lru.calculatedSize;
    },
  };
}

/** Per-entry cost beyond the characters: the slot and the two string headers (an estimate on the high side). */
const ENTRY_OVERHEAD = 96;

/** A string-to-string memo (credential -> partition, path -> route template, flight key -> pool token). */
export type BoundedMemo = Memo<string, string>;

/** The cost counted for one entry: two bytes a character, plus ENTRY_OVERHEAD. */
export function memoEntryBytes(key: string, value: string): number {
  return 2 * (key.length + value.length) + ENTRY_OVERHEAD;
}

/** A string-to-string memo of at most `maxBytes`; a key longer than `maxKeyChars` is never kept. */
export function createBoundedMemo(maxBytes: number, maxKeyChars: number): BoundedMemo {
  const memo = createMemo<string, string>(maxBytes, memoEntryBytes);
  return {
    ...memo,
    set(key, value) {
      if (key.length > maxKeyChars || memoEntryBytes(key, value) > maxBytes) return;
      // A new value for a held key replaces it (the token memo: the newest entry's token).
      if (memo.peek(key) !== value) memo.set(key, value);
    },
    get bytes() {
      return memo.bytes;
    },
  };
}
