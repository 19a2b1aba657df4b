/**
 * The store interface every cache tier implements (L1 memory now, Redis L2 later). A store knows
 * nothing about HTTP: it keeps entries under keys for a retention time. Methods may be sync or
 * async so the in-memory tier costs no promise on the hit path.
 */
import type { CacheEntry } from './entry.js';

export interface CacheStore {
  get(key: string): CacheEntry | undefined | Promise<CacheEntry | undefined>;
  /** Keep `entry` under `key` for at most `ttlMs`. */
  set(key: string, entry: CacheEntry, ttlMs: number): void | Promise<void>;
  delete(key: string): void | Promise<void>;
}
