/**
 * Coalescing: identical misses share one upstream exchange. In this process, concurrent requests
 * for one key wait on the first one's flight (single-flight). Across replicas (Redis), a miss takes
 * a short lock per key: the winner fetches, the others serve what it stored in L2, or fetch
 * themselves when it finished without storing anything or their wait ran out. The single-flight
 * map is here too; the Redis lock is flight-lock.ts.
 */
import type { Metrics } from '../../platform/metrics/registry.js';
import { ATTR, NO_TRACING, SPANS, type SpanHandle, type Tracing } from '../../platform/trace/tracing.js';
import type { CacheResult } from '../rules/classify.js';
import type { CacheEntry } from '../rules/entry.js';
import type { CacheRequest } from '../rules/request.js';
import type { Cache } from './cache.js';

export interface Coalescer {
  /**
   * Runs `fetch` unless a flight for the request's key is under way; `joined` tells whether this
   * caller waits on another's. `redisAnswered`: false when Redis did not answer this request's L2
   * lookup, so the cross-replica lock (which would wait on it too) is skipped. `ahead`: a
   * refresh ahead of expiry (src/paths/rest/refresh-ahead.ts), which takes the lock although it
   * revalidates, so that one replica refreshes and the others take its newer entry.
   */
  run(
    req: CacheRequest,
    stale: CacheEntry | undefined,
    redisAnswered: boolean,
    fetch: () => Promise<CacheResult>,
    /** The request's span: a wait on another replica's flight is a child of it. */
    parent?: SpanHandle,
    ahead?: boolean,
  ): { promise: Promise<CacheResult>; joined: boolean };
  /** Requests currently waiting on another's flight. */
  readonly waiters: number;
}

const newer = (entry: CacheEntry, than: number | undefined): boolean => than === undefined || entry.storedAt > than;

/** `tracing`: a wait on another replica's flight is a span (a wait in this process is the cached path's). */
export function createCoalescer(
  cache: Pick<Cache, 'shared' | 'promote' | 'usable' | 'written'>,
  metrics: Metrics,
  waitMs: number,
  tracing: Tracing = NO_TRACING,
): Coalescer {
  const flights = createSingleFlight<CacheResult>();

  /** `newerThan`: a refresh ahead follows only an entry stored after the one it revalidates. */
  const acrossReplicas = async (
    req: CacheRequest,
    fetch: () => Promise<CacheResult>,
    parent: SpanHandle | undefined,
    newerThan: number | undefined,
  ): Promise<CacheResult> => {
    const shared = cache.shared!;
    const key = req.keys.flight;
    /** Another replica's entry, found in L2: served as that replica's fetch. */
    const followed = (entry: CacheEntry): CacheResult => {
      metrics.flightLocks.inc({ result: 'followed' });
      cache.promote(key, entry);
      return { kind: 'followed', entry };
    };
    const lock = await shared.lock.acquire(key);
    if (lock.kind === 'won') {
      try {
        // Checked again under the lock: a winner that finished between our L2 miss and our lock
        // has left its entry in L2. (One this request may not use, such as an entry of a
        // credential the upstream has since rejected, is no answer: fetch.)
        const again = await shared.l2.get(key);
        if (again.kind === 'hit' && newer(again.entry, newerThan) && cache.usable(req, again.entry) !== undefined)
          return followed(again.entry);
        metrics.flightLocks.inc({ result: 'won' });
        return await fetch();
      } finally {
        void cache.written(key).finally(() => lock.release());
      }
    }
    if (lock.kind === 'lost') {
      const wait = () => shared.lock.waitFor(key, Date.now() + waitMs, newerThan);
      const waited = !tracing.on
        ? await wait()
        : await tracing.child(SPANS.flightWait, parent, { [ATTR.flight]: 'replicas' }, async (span) => {
            const found = await wait();
            span.set('etagere.flight.result', found.kind);
            return found;
          });
      if (waited.kind === 'entry' && cache.usable(req, waited.entry) !== undefined) return followed(waited.entry);
      metrics.flightLocks.inc({ result: waited.kind === 'entry' ? 'gone' : waited.kind });
    } else {
      metrics.flightLocks.inc({ result: 'unavailable' });
    }
    return fetch();
  };

  return {
    run(req, stale, redisAnswered, fetch, parent, ahead = false) {
      // Only a plain miss (or a refresh ahead) whose key is the one it is stored under is locked across
      // replicas: a revalidation is a free 304, and per-token keys are not known before a token is chosen.
      const locked = cache.shared !== undefined && redisAnswered && (stale === undefined || ahead) && !req.keys.perToken;
      const newerThan = ahead ? stale?.storedAt : undefined;
      const { promise, shared } = flights.run(req.keys.flight, locked ? () => acrossReplicas(req, fetch, parent, newerThan) : fetch);
      return { promise, joined: shared };
    },
    get waiters() {
      return flights.waiters;
    },
  };
}

/*
 * Coalescing: concurrent calls with the same key share one in-flight promise. The first caller
 * runs the work; later callers wait on the same result (or the same error). The slot frees as soon
 * as the work settles, so a later call starts fresh work.
 */
export interface SingleFlight<T> {
  /** Runs `work` unless a call for `key` is in flight; `shared` tells whether this caller joined one. */
  run(key: string, work: () => Promise<T>): { promise: Promise<T>; shared: boolean };
  /** Number of callers currently waiting on another caller's work. */
  readonly waiters: number;
  readonly inFlight: number;
}

export function createSingleFlight<T>(): SingleFlight<T> {
  const flights = new Map<string, { promise: Promise<T>; joined: number }>();
  let waiters = 0;
  return {
    run(key, work) {
      const existing = flights.get(key);
      if (existing !== undefined) {
        existing.joined++;
        waiters++;
        const promise = existing.promise.finally(() => {
          waiters--;
        });
        return { promise, shared: true };
      }
      let promise: Promise<T>;
      try {
        promise = work();
      } catch (err) {
        promise = Promise.reject(err);
      }
      const flight = { promise, joined: 0 };
      flights.set(key, flight);
      const clear = (): void => {
        if (flights.get(key) === flight) flights.delete(key);
      };
      flight.promise.then(clear, clear);
      return { promise: flight.promise, shared: false };
    },
    get waiters() {
      return waiters;
    },
    get inFlight() {
      return flights.size;
    },
  };
}
