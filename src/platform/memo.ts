/**
 * A string-to-string memo bounded in bytes, for the memos on the hit path (credential -> partition,
 * path -> route template, flight key -> pool token). What clients send decides the keys, so the bound is on what they weigh,
 * not on how many there are: a key longer than `maxKeyChars` is never kept, and once the memo would
 * pass `maxBytes` it starts over (a clear is one allocation; the common values come back at once).
 * Its size is exported in `etagere_cache_bytes`. Pure (no I/O, no timers).
 */

/** Per-entry cost beyond the characters: the Map slot and the two string headers (an estimate on the high side). */
const ENTRY_OVERHEAD = 96;

export interface BoundedMemo {
  get(key: string): string | undefined;
  set(key: string, value: string): void;
  clear(): void;
  /** Bytes held, as counted (two bytes a character, plus ENTRY_OVERHEAD an entry). */
  readonly bytes: number;
}

/** The cost counted for one entry. */
export function memoEntryBytes(key: string, value: string): number {
  return 2 * (key.length + value.length) + ENTRY_OVERHEAD;
}

export function createBoundedMemo(maxBytes: number, maxKeyChars: number): BoundedMemo {
  const map = new Map<string, string>();
  let bytes = 0;
  return {
    get: (key) => map.get(key),
    set(key, value) {
      if (key.length > maxKeyChars) return;
      const cost = memoEntryBytes(key, value);
      if (cost > maxBytes) return;
      const held = map.get(key);
      if (held === value) return;
      // A new value for a held key replaces it (the token memo: the newest entry's token).
      const freed = held === undefined ? 0 : memoEntryBytes(key, held);
      if (bytes - freed + cost > maxBytes) {
        map.clear();
        bytes = 0;
      } else bytes -= freed;
      map.set(key, value);
      bytes += cost;
    },
    clear() {
      map.clear();
      bytes = 0;
    },
    get bytes() {
      return bytes;
    },
  };
}
