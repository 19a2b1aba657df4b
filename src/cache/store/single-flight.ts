/**
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
