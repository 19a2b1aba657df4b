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
 * The memo is bounded in bytes (src/platform/bytes.ts: the least recently used go first), so flight
 * keys that clients make up cannot grow it; forgetting costs one full scan.
 *
 * While L1 does not change (no entry stored, replaced or gone: its `generation`) and the pool's
 * members are the same (theirs), what a flight key was last answered with is still held, fresh or not:
 * a hit is then one map lookup (`hot`) and those two checks. Any change of L1 empties that map, so
 * it never holds an entry L1 no longer does. Its hits touch the L1 entry (recency) every
 * TOUCH_EVERY times, so a hot entry is not the least recently used one.
 */
import { createBoundedMemo, type BoundedMemo } from '../../platform/bytes.js';
import type { CacheEntry } from '../rules/entry.js';
import type { MemoryStore } from './memory-store.js';
import { currentAge } from '../rules/policy.js';
import type { CacheRequest } from '../rules/request.js';

/** Bound of the flight -> member key memo. */
export const TOKEN_MEMO_BYTES = 4 * 1024 * 1024;
/** Longer flight keys are not remembered (they are scanned every time). */
const TOKEN_MEMO_KEY_CHARS = 4096;
/** A hot entry's hits touch it in L1 once in this many. */
const TOUCH_EVERY = 16;
/** Counted per hot flight beyond its key's characters. */
const HOT_OVERHEAD = 96;

const isFresh = (entry: CacheEntry, now: number): boolean => currentAge(entry, now) < entry.lifetime;

/** What a flight key was last answered with in L1, while L1 and the members stay the same. */
interface Hot {
  readonly entry: CacheEntry;
  readonly key: string;
  readonly members: number;
  touches: number;
}

export class TokenMemo {
  readonly #memo: BoundedMemo;
  readonly #hot = new Map<string, Hot>();
  #hotBytes = 0;
  /** L1's generation when `#hot` was last emptied. */
  #generation = -1;

  constructor(maxBytes = TOKEN_MEMO_BYTES) {
    this.#memo = createBoundedMemo(maxBytes, TOKEN_MEMO_KEY_CHARS);
  }

  /** The entry for a per-token request in L1: the memoized token's when fresh and usable, else the freshest of every member's. */
  fromL1(req: CacheRequest, l1: MemoryStore, usable: (entry: CacheEntry) => boolean, now: number): CacheEntry | undefined {
    const { keys } = req;
    if (l1.generation !== this.#generation) {
      this.#hot.clear();
      this.#hotBytes = 0;
      this.#generation = l1.generation;
    }
    const hot = this.#hot.get(keys.flight);
    if (hot !== undefined && hot.members === keys.membersGeneration && isFresh(hot.entry, now) && usable(hot.entry)) {
      if (++hot.touches % TOUCH_EVERY === 0) l1.get(hot.key);
      return hot.entry;
    }
    const key = this.#memo.get(keys.flight);
    if (key !== undefined && keys.isMemberKey(key)) {
      const entry = l1.get(key);
      if (entry !== undefined && isFresh(entry, now) && usable(entry)) return this.#heat(req, key, entry, l1);
    }
    const { candidates } = keys;
    const best = freshest(
      candidates.map((candidate) => l1.get(candidate)),
      now,
    );
    if (best.index === -1) return undefined;
    const winner = candidates[best.index]!;
    if (winner !== key) this.#memo.set(keys.flight, winner);
    return this.#heat(req, winner, best.entry!, l1);
  }

  /** `token`'s entry is now the newest for the request whose keys these are (stored, promoted). */
  remember(keys: Pick<CacheRequest['keys'], 'flight' | 'store'>, token: string): void {
    this.#memo.set(keys.flight, keys.store(token));
  }

  /** Bytes the memo and the hot flights hold. */
  get bytes(): number {
    return this.#memo.bytes + this.#hotBytes;
  }

  /** Keeps what the flight key was answered with, for the next hit (only while L1 has not changed since). */
  #heat(req: CacheRequest, key: string, entry: CacheEntry, l1: MemoryStore): CacheEntry {
    const { flight, membersGeneration } = req.keys;
    // A lookup that expired an entry changed L1: nothing found before it is kept.
    if (l1.generation === this.#generation && !this.#hot.has(flight)) {
      this.#hot.set(flight, { entry, key, members: membersGeneration, touches: 0 });
      this.#hotBytes += 2 * flight.length + HOT_OVERHEAD;
    }
    return entry;
  }
}

/** A token memo of `maxBytes` (TOKEN_MEMO_BYTES by default). */
export const createTokenMemo = (maxBytes = TOKEN_MEMO_BYTES): TokenMemo => new TokenMemo(maxBytes);

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
