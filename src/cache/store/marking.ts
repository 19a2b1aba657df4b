/**
 * Stale marks as L1 sees them: the path index of its keys (memory-store.ts) and the marks
 * remembered (stale-marks.ts). A mark turns every L1 entry in its scopes stale at once, through the
 * index; entries that reach L1 later (read from L2, or stored by an exchange that began before the
 * mark) are checked as they arrive. The hit path (cache.ts `hit`) does not change: a marked entry is
 * simply an entry with no freshness left.
 */
import type { Metrics } from '../../platform/metrics/registry.js';
import type { CacheEntry } from '../rules/entry.js';
import { type MemoryStore, createPathIndex, type PathIndex } from './memory-store.js';
import { parseScopeId, createStaleMarks, markedStale, originOf, type Mark, type StaleMarksSettings } from '../rules/stale-marks.js';

export interface Marking {
  readonly index: PathIndex;
  /** Scopes remembered. */
  readonly scopes: number;
  /**
   * Marks the scopes (ids, stale-marks.ts) stale in L1 and remembers them; returns the L1 entries
   * in them (all marked before the call returns, or, past MARKED_PER_TURN, within the next turns).
   */
  mark(ids: readonly string[], mark: Mark): number;
  /**
   * `entry` as it may be kept under `key`: marked stale when a mark covering its path was made at
   * or after `origin`: when its request went upstream (an exchange's answer may predate a change
   * announced while it was in flight), else when its representation was last known current
   * (`originOf`, for an entry read from L2: when the replica that wrote it sent its request).
   */
  checked(key: string, entry: CacheEntry, now: number, origin?: number): CacheEntry;
  /** An exchange for `key` stored or confirmed an entry; `changed`: a new representation came back. */
  settled(key: string, changed: boolean, now: number): void;
}

/**
 * Entries marked in one turn of the event loop (a few µs each): a scope with more (a purge of "/",
 * an owner's prefix) goes on in later turns, so requests are not held up. An entry stored between
 * two turns is checked against the mark like any other (`checked`), not marked blindly.
 */
const MARKED_PER_TURN = 2_000;

export const DEFAULT_MARK_SETTINGS: StaleMarksSettings = { horizonMs: 3_600_000, maxScopes: 100_000, maxPending: 100_000 };

/** `l1` is resolved lazily: the store is built with the index's hooks, after the index (none with `cache.l1: false`). */
export function createMarking(settings: StaleMarksSettings, metrics: Metrics, l1: () => MemoryStore | undefined): Marking {
  const index = createPathIndex();
  const marks = createStaleMarks(settings);
  return {
    index,
    get scopes() {
      return marks.size;
    },
    mark(ids, mark) {
      marks.remember(ids, mark);
      const store = l1();
      if (store === undefined) return 0;
      // Scopes of one delivery overlap (a repository and its issues): each entry counts once.
      const keys = new Set<string>();
      for (const id of ids) {
        const scope = parseScopeId(id);
        if (scope !== undefined) for (const key of index.keysIn(scope)) keys.add(key);
      }
      const queue = [...keys];
      const markSome = (from: number, blindly: boolean): void => {
        let count = 0;
        const end = Math.min(queue.length, from + MARKED_PER_TURN);
        for (let position = from; position < end; position++) {
          const key = queue[position]!;
          const entry = store.peek(key);
          if (entry === undefined) continue;
          // Later turns: an entry stored since the mark was checked as it arrived.
          if (!blindly && originOf(entry) > mark.at) continue;
          store.replace(key, markedStale(entry));
          marks.pending(key, mark);
          count++;
        }
        if (count > 0) metrics.cacheInvalidations.inc({ source: mark.source }, count);
        if (end < queue.length) setImmediate(() => markSome(end, false));
      };
      markSome(0, true);
      return queue.length;
    },
    checked(key, entry, now, origin = originOf(entry)) {
      if (marks.size === 0) return entry;
      const mark = marks.covering(key, origin, now);
      if (mark === undefined) return entry;
      marks.pending(key, mark);
      return markedStale(entry);
    },
    settled(key, changed, now) {
      const seconds = marks.settle(key, changed, now);
      if (seconds !== undefined) metrics.webhookStaleness.observe(seconds);
    },
  };
}
