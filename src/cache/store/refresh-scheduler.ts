/**
 * The refresh-ahead schedule (src/cache/rules/refresh-ahead.ts says when): per key, the one
 * refresh due for the entry version (its storedAt) that was read. One timer for all of them,
 * ticking in buckets of `tickMs` only while something is scheduled, and unref'd (it never keeps the
 * process alive). Bounded: at most `maxKeys` scheduled (a read past that schedules nothing) and at
 * most `maxRunning` refreshes at once (a due one past that waits for the next tick).
 */

/** A refresh to run; it settles when done and never rejects (the caller counts its outcome). */
export type RefreshJob = () => Promise<void>;

export interface RefreshSchedulerSettings {
  maxKeys: number;
  maxRunning: number;
  tickMs: number;
  now?: () => number;
}

export interface RefreshScheduler {
  /** Whether a refresh of `key` is scheduled for the entry stored at `version` (the hit path: one map lookup). */
  has(key: string, version: number): boolean;
  /**
   * Schedules `job` at `at` for `key`, replacing one for another version; false when the schedule is
   * full. Once started, the key stays held for that version until `until` (the entry's expiry), so
   * reads of the same version during or after its refresh (one that failed, say) schedule no other.
   */
  schedule(key: string, version: number, at: number, job: RefreshJob, until?: number): boolean;
  /** Keys held: scheduled, or started and held until their entry's expiry. */
  readonly size: number;
  /** Refreshes running now. */
  readonly running: number;
  /** Forgets every scheduled refresh and stops the timer (running ones finish on their own). */
  close(): void;
}

interface Slot {
  version: number;
  bucket: number;
  job: RefreshJob;
  until: number;
  /** Started: the slot only holds its version until `until`. */
  started: boolean;
}

export const DEFAULT_REFRESH_SCHEDULER: RefreshSchedulerSettings = { maxKeys: 10_000, maxRunning: 16, tickMs: 100 };

export function createRefreshScheduler(settings: RefreshSchedulerSettings = DEFAULT_REFRESH_SCHEDULER): RefreshScheduler {
  const { maxKeys, maxRunning, tickMs } = settings;
  const now = settings.now ?? Date.now;
  const slots = new Map<string, Slot>();
  /** Bucket number (due time / tickMs, rounded up) -> keys due then. */
  const buckets = new Map<number, Set<string>>();
  let running = 0;
  let done = 0; // the last bucket worked through
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const place = (key: string, bucket: number): void => {
    let keys = buckets.get(bucket);
    if (keys === undefined) buckets.set(bucket, (keys = new Set()));
    keys.add(key);
  };

  const start = (slot: Slot): void => {
    running++;
    void slot.job().finally(() => {
      running--;
    });
  };

  const tick = (): void => {
    const current = Math.floor(now() / tickMs);
    for (let bucket = done + 1; bucket <= current; bucket++) {
      const keys = buckets.get(bucket);
      if (keys === undefined) continue;
      buckets.delete(bucket);
      for (const key of keys) {
        const slot = slots.get(key);
        if (slot === undefined || slot.bucket !== bucket) continue;
        if (slot.started) {
          slots.delete(key);
          continue;
        }
        if (running >= maxRunning) {
          // Over the cap: the next tick tries again.
          slot.bucket = current + 1;
          place(key, slot.bucket);
          continue;
        }
        slot.started = true;
        slot.bucket = Math.max(Math.ceil(slot.until / tickMs), current + 1);
        place(key, slot.bucket);
        start(slot);
      }
    }
    done = current;
    if (slots.size === 0 && timer !== undefined) {
      clearInterval(timer);
      timer = undefined;
    }
  };

  return {
    has: (key, version) => slots.get(key)?.version === version,
    schedule(key, version, at, job, until = at) {
      if (closed) return false;
      const old = slots.get(key);
      if (old === undefined && slots.size >= maxKeys) return false;
      const bucket = Math.max(Math.ceil(at / tickMs), Math.floor(now() / tickMs) + 1);
      if (old === undefined) slots.set(key, { version, bucket, job, until, started: false });
      else {
        buckets.get(old.bucket)?.delete(key);
        Object.assign(old, { version, bucket, job, until, started: false });
      }
      place(key, bucket);
      if (timer === undefined) {
        done = Math.floor(now() / tickMs);
        timer = setInterval(tick, tickMs);
        timer.unref();
      }
      return true;
    },
    get size() {
      return slots.size;
    },
    get running() {
      return running;
    },
    close() {
      closed = true;
      slots.clear();
      buckets.clear();
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
    },
  };
}
