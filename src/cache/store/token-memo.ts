/**
 * The L1 lookup of a pool of non-equivalent tokens, O(1) in the pool's size on a hit. Each token
 * has its own partition, so a request may be answered from any current member's entry (the
 * freshest). Looking in all of them costs a key and a probe per token; instead a memo remembers,
 * per flight key (the key without a token), the key of the token whose entry was last stored,
 * promoted or chosen for it. A hit probes that key alone (the memo's own string: no key is built or
 * hashed again): when its token is still a member (a hash lookup of the token's name: a removed
 * token's partition is never served) and its entry is present, fresh and usable by this request,
 * that is the answer. Otherwise (memo miss, token gone, entry gone, stale or not
 * usable) every member's key is looked in, as before, and the winner is remembered.
 *
 * The memo is bounded in bytes (src/platform/memo.ts: the least recently used go first), so flight
 * keys that clients make up cannot grow it; forgetting costs one full scan.
 */
import { createBoundedMemo } from '../../platform/memo.js';
import type { CacheEntry } from '../rules/entry.js';
import type { MemoryStore } from './memory-store.js';
import { currentAge } from '../rules/policy.js';
import type { CacheRequest } from '../rules/request.js';

/** Bound of the flight -> member key memo. */
export const TOKEN_MEMO_BYTES = 4 * 1024 * 1024;
/** Longer flight keys are not remembered (they are scanned every time). */
const TOKEN_MEMO_KEY_CHARS = 4096;

export interface TokenMemo {
  /** The entry for a per-token request in L1: the memoized token's when fresh and usable, else the freshest of every member's. */
  fromL1(req: CacheRequest, l1: MemoryStore, usable: (entry: CacheEntry) => boolean, now: number): CacheEntry | undefined;
  /** `token`'s entry is now the newest for the request whose keys these are (stored, promoted). */
  remember(keys: Pick<CacheRequest['keys'], 'flight' | 'store'>, token: string): void;
  readonly bytes: number;
}

const isFresh = (entry: CacheEntry, now: number): boolean => currentAge(entry, now) < entry.lifetime;

export function createTokenMemo(maxBytes = TOKEN_MEMO_BYTES): TokenMemo {
  const memo = createBoundedMemo(maxBytes, TOKEN_MEMO_KEY_CHARS);
  return {
    fromL1(req, l1, usable, now) {
      const { keys } = req;
      const key = memo.get(keys.flight);
      if (key !== undefined && keys.isMemberKey(key)) {
        const entry = l1.get(key);
        if (entry !== undefined && isFresh(entry, now) && usable(entry)) return entry;
      }
      const { candidates } = keys;
      const best = freshest(
        candidates.map((candidate) => l1.get(candidate)),
        now,
      );
      if (best.index !== -1) {
        const winner = candidates[best.index]!;
        if (winner !== key) memo.set(keys.flight, winner);
      }
      return best.entry;
    },
    remember: (keys, token) => memo.set(keys.flight, keys.store(token)),
    get bytes() {
      return memo.bytes;
    },
  };
}

/** Of the entries found under several keys, a fresh one wins over a stale one, then the newest. */
export function freshest(entries: ReadonlyArray<CacheEntry | undefined>, now: number): { entry: CacheEntry | undefined; index: number } {
  let best: CacheEntry | undefined;
  let index = -1;
  entries.forEach((entry, at) => {
    if (entry === undefined) return;
    const better =
      best === undefined ||
      (isFresh(entry, now) ? !isFresh(best, now) || entry.storedAt > best.storedAt : !isFresh(best, now) && entry.storedAt > best.storedAt);
    if (better) {
      best = entry;
      index = at;
    }
  });
  return { entry: best, index };
}
