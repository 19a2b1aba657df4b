/**
 * Pure: what webhook deliveries and purges made stale, remembered by path scope (path-scope.ts).
 * Marking does not delete: a marked entry is kept with no freshness left (`markedStale`), so the
 * next request revalidates it (a free 304 on GitHub when nothing relevant changed) and falls back
 * on it if the upstream fails (stale-if-error).
 *
 * L1 entries are marked when the mark is made (validity.ts, through the path index). The marks are
 * remembered for the entries that arrive later from elsewhere: read from L2, or fetched by an
 * exchange that started before the mark (its answer may predate the change). Such an entry is
 * stale when its representation is from before a mark that covers its path: its origin, when its
 * request went upstream (`originOf`, to the millisecond), is at or before the mark.
 *
 * The marks also time the staleness window: from a delivery to the first revalidation of an
 * entry it marked that brought a changed representation (`etagere_webhook_staleness_seconds`).
 */
import type { CacheEntry } from './entry.js';
import { coveringScopeIds, keyPath } from './path-scope.js';

export type MarkSource = 'webhook' | 'purge';

/** One marking: a delivery or a purge call. Every scope it names shares it. */
export interface Mark {
  /** When it was made (ms since epoch, on the replica that received it). */
  readonly at: number;
  readonly source: MarkSource;
  /** The staleness window of this delivery has been observed (the first changed revalidation). */
  observed: boolean;
}

export interface StaleMarksSettings {
  /** Marks older than this are forgotten: no entry stored before them can still be fresh. */
  horizonMs: number;
  /** At most this many scopes are remembered (the oldest forgotten first). */
  maxScopes: number;
  /** At most this many marked entries wait for their first revalidation (the staleness window). */
  maxPending: number;
}

export interface StaleMarks {
  /** Scopes remembered. */
  readonly size: number;
  remember(ids: readonly string[], mark: Mark): void;
  /** The newest mark covering the path of `key` made at or after `origin`, if any (`now` forgets old marks). */
  covering(key: string, origin: number, now: number): Mark | undefined;
  /** `key`'s entry was marked stale by `mark`: its next exchange closes the staleness window. */
  pending(key: string, mark: Mark): void;
  /**
   * An exchange for `key` came back; `changed`: with a new representation (not a 304). Returns the
   * seconds from the delivery when this closes a delivery's staleness window, else undefined.
   */
  settle(key: string, changed: boolean, now: number): number | undefined;
}

/**
 * When an entry's representation was last known current: when its request went upstream (less its
 * Age), else, for an entry stored without that time, received less the age it already had (from
 * `Date`, whole seconds: errs towards stale).
 */
export function originOf(entry: Pick<CacheEntry, 'storedAt' | 'initialAge' | 'currentAt'>): number {
  return entry.currentAt ?? entry.storedAt - entry.initialAge * 1000;
}

/** The entry with no freshness left and no stale-while-revalidate window: the next use revalidates. */
export function markedStale(entry: CacheEntry): CacheEntry {
  if (entry.lifetime === 0 && entry.staleWhileRevalidate === 0) return entry;
  return { ...entry, lifetime: 0, staleWhileRevalidate: 0 };
}

/** Sets `key` to `value` as the newest of `map`, forgetting the oldest past `max`. */
function setNewest<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) {
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }
}

export function createStaleMarks(settings: StaleMarksSettings): StaleMarks {
  const marks = new Map<string, Mark>();
  const waiting = new Map<string, Mark>();
  return {
    get size() {
      return marks.size;
    },
    remember(ids, mark) {
      for (const id of ids) {
        const known = marks.get(id);
        if (known === undefined || known.at <= mark.at) setNewest(marks, id, mark, settings.maxScopes);
      }
    },
    covering(key, origin, now) {
      if (marks.size === 0) return undefined;
      const where = keyPath(key);
      if (where === undefined) return undefined;
      let newest: Mark | undefined;
      for (const id of coveringScopeIds(where.upstream, where.path)) {
        const mark = marks.get(id);
        if (mark === undefined) continue;
        if (now - mark.at > settings.horizonMs) marks.delete(id);
        else if (mark.at >= origin && (newest === undefined || mark.at > newest.at)) newest = mark;
      }
      return newest;
    },
    pending(key, mark) {
      if (mark.source === 'webhook' && !mark.observed) setNewest(waiting, key, mark, settings.maxPending);
    },
    settle(key, changed, now) {
      if (waiting.size === 0) return undefined;
      const mark = waiting.get(key);
      if (mark === undefined) return undefined;
      waiting.delete(key);
      if (!changed || mark.observed) return undefined;
      mark.observed = true;
      return Math.max(0, (now - mark.at) / 1000);
    },
  };
}
